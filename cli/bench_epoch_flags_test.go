package cli

import (
	"strings"
	"testing"
)

// TestBenchEpochAcceptsItsEpochsFlag: --epochs N with --epoch reaches the
// epoch benchmark (which then wants a CUDA device) instead of failing the
// config's validation, and --epochs 0 is refused naming the flag.
func TestBenchEpochAcceptsItsEpochsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--device", "cpu", "--epoch", "--epochs", "20"}, "--device cuda"},
		{[]string{"bench", "--device", "cpu", "--epoch", "--epochs", "0"}, "flag --epochs 0"},
	} {
		_, errOut, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, error %q, want a failure mentioning %q", tc.args, code, strings.TrimSpace(errOut), tc.want)
		}
	}
}
