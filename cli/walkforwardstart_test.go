package cli

import (
	"strings"
	"testing"
)

// TestWalkForwardStartRefusesABadStudyBeforeDialling: "walkforward
// start" reads the study's flags as "walkforward" does and refuses a bad
// one with a usage error naming the flag, before it dials Temporal (the
// address here answers nothing).
func TestWalkForwardStartRefusesABadStudyBeforeDialling(t *testing.T) {
	series := "../walkforward/testdata/EURUSD_H4.csv,../walkforward/testdata/GBPUSD_H4.csv"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--series", series, "--max-concurrent", "0"}, "--max-concurrent 0"},
		{[]string{"--series", series, "--seeds", "0"}, "--seeds 0"},
		{[]string{"--series", series, "--leave-out", "NOPE"}, "--leave-out"},
		{[]string{"--series", series, "--step", "0"}, "each must be a positive period"},
		{[]string{"--series", series, "--data", "synthetic"}, "--data and --series"},
	} {
		args := append([]string{"walkforward", "start", "--address", "127.0.0.1:1"}, c.args...)
		_, errOut, code := run(t, args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want a failure saying %q", c.args, code, errOut, c.want)
		}
	}
}
