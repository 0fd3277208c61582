package cli

import (
	"strings"
	"testing"
)

// TestWorkerRefusesDevicesBeforeConnecting: a worker's device flags are
// checked, and its devices opened, before it connects to PostgreSQL or
// Temporal (both unreachable here), so a device that cannot run fails the
// start at once with an error that names it.
func TestWorkerRefusesDevicesBeforeConnecting(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"worker", "--device", "cuda", "--cpu-devices", "2"}, []string{"--cpu-devices 2", "--device cpu"}},
		{[]string{"worker", "--device", "cpu", "--runs-per-device", "0"}, []string{"--runs-per-device 0"}},
		{[]string{"worker", "--device", "cpu", "--cpu-devices", "-1"}, []string{"--cpu-devices -1"}},
		{[]string{"worker", "--device", "cpu", "--slots", "2", "--runs-per-device", "3"}, []string{"--slots 2", "--runs-per-device 3"}},
		{[]string{"worker", "--device", "tpu"}, []string{`device "tpu"`}},
		{[]string{"worker", "--device", "cuda:x"}, []string{`device "cuda:x"`}},
		{[]string{"dev", "--device", "cpu", "--runs-per-device", "-2"}, []string{"--runs-per-device -2"}},
	}
	for _, c := range cases {
		_, errOut, code := run(t, c.args...)
		if code == 0 {
			t.Errorf("%s: exit 0, want failure", strings.Join(c.args, " "))
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: error %q does not mention %q", strings.Join(c.args, " "), strings.TrimSpace(errOut), w)
			}
		}
	}
}
