package activitiestest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/walkforward/walkforwardtest"
)

// WalkForwardSpec is walkforward's fixture study (walkforward/study_test.go)
// under studyID: three H4 forex slices read from dir, weekly windows, two
// seeds, GBPUSD left out, a config the CPU trains in a fraction of a
// second a run.
func WalkForwardSpec(t testing.TB, dir, studyID string) activities.WalkForwardSpec {
	t.Helper()
	var paths []string
	for _, n := range []string{"EURUSD_H4", "GBPUSD_H4", "USDJPY_H4"} {
		paths = append(paths, filepath.Join(dir, n+".csv"))
	}
	series, err := prices.ParseSeries(strings.Join(paths, ","))
	if err != nil {
		t.Fatal(err)
	}
	week := walkforward.Period{Days: 7}
	return activities.WalkForwardSpec{StudyID: studyID, Config: walkforwardtest.TinyConfig(t), Series: series,
		Layout: walkforward.Layout{Step: week, Test: week, Valid: week, MinShare: 0.25},
		Seeds:  walkforward.SeedList(1, 2), LeaveOut: []string{"GBPUSD_H4"}}
}
