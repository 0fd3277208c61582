package walkforward_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/walkforward"
)

// TestStudyDiffNamesTheSettingsThatDiffer: two studies recorded from
// the same settings differ in nothing, whatever their results, windows,
// timings, notes or the order of the keys in their JSON; each setting
// changed alone is named alone; an empty and a missing list are the
// same.
func TestStudyDiffNamesTheSettingsThatDiffer(t *testing.T) {
	base := walkforward.Output{Config: config.Defaults(), Series: []prices.SeriesSpec{{Name: "A", Path: "a.csv"}, {Name: "B", Path: "b.csv"}},
		Layout: walkforward.DefaultLayout(), Seeds: []uint64{1, 2}, LeaveOut: []string{"B"}, Gate: walkforward.GateWindow, Trials: walkforward.Trials{Prior: 3}}
	rec := func(o walkforward.Output) []string {
		t.Helper()
		a, err := walkforward.StudyRecord("s", base)
		if err != nil {
			t.Fatal(err)
		}
		b, err := walkforward.StudyRecord("s", o)
		if err != nil {
			t.Fatal(err)
		}
		return walkforward.StudyDiff(a, b)
	}
	same := base
	same.Notes, same.Seconds, same.Device = []string{"ran"}, 12, "cuda:0"
	same.Results = []walkforward.Result{{Window: 0, Series: "A", Strategy: walkforward.StrategyAgent, Seed: 1}}
	if d := rec(same); len(d) != 0 {
		t.Errorf("a study's results and notes count as settings: %v", d)
	}
	for _, c := range []struct {
		want   string
		change func(*walkforward.Output)
	}{
		{"config", func(o *walkforward.Output) { o.Config.Epochs++ }},
		{"series", func(o *walkforward.Output) { o.Series = o.Series[:1] }},
		{"layout", func(o *walkforward.Output) { o.Layout.MinShare /= 2 }},
		{"seeds", func(o *walkforward.Output) { o.Seeds = []uint64{1} }},
		{"leave_out", func(o *walkforward.Output) { o.LeaveOut = nil }},
		{"gate", func(o *walkforward.Output) { o.Gate = walkforward.GateNone }},
		{"panel", func(o *walkforward.Output) { o.Panel = true }},
		{"prior_trials", func(o *walkforward.Output) { o.Trials.Prior = 0 }},
	} {
		o := base
		o.Series, o.Seeds, o.LeaveOut = slices.Clone(base.Series), slices.Clone(base.Seeds), slices.Clone(base.LeaveOut)
		c.change(&o)
		if d := rec(o); !slices.Equal(d, []string{c.want}) {
			t.Errorf("%s changed: StudyDiff says %v, want [%s]", c.want, d, c.want)
		}
	}

	// The same config with its JSON keys in another order.
	a, _ := walkforward.StudyRecord("s", base)
	var m map[string]any
	if err := json.Unmarshal(a.Config, &m); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Config, _ = json.MarshalIndent(m, "", " ") // sorted keys, other spacing
	b.LeaveOut = append([]string{}, a.LeaveOut...)
	if d := walkforward.StudyDiff(a, b); len(d) != 0 {
		t.Errorf("the same config in other JSON: %v", d)
	}
	a.LeaveOut, b.LeaveOut = nil, []string{}
	if d := walkforward.StudyDiff(a, b); len(d) != 0 {
		t.Errorf("an empty and a missing leave_out: %v", d)
	}
}
