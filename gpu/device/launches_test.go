package device

import (
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/gpu/cuda"
)

func TestDependentLaunchesOnlyWhereTheDeviceAndDriverHaveThem(t *testing.T) {
	h200 := cuda.DeviceInfo{Name: "NVIDIA H200", Major: 9}
	a100 := cuda.DeviceInfo{Name: "NVIDIA A100", Major: 8}
	for _, c := range []struct {
		name    string
		info    cuda.DeviceInfo
		ex      bool
		setting string
		on      bool
		says    string // in the description, or in the error when err
		err     bool
	}{
		{"sm_90 by default", h200, true, "auto", true, "programmatic dependent", false},
		{"sm_90 asked for", h200, true, "on", true, "programmatic dependent", false},
		{"sm_90 turned off", h200, true, "off", false, "serial: gpu tuning pdl = off", false},
		{"sm_80 by default", a100, true, "auto", false, "serial: sm_80 has no programmatic dependent launch", false},
		{"sm_80 asked for", a100, true, "on", false, "pdl = on (DQNFLOW_PDL): sm_80", true},
		{"old driver", h200, false, "auto", false, "serial: the driver has no cuLaunchKernelEx", false},
		{"old driver asked for", h200, false, "on", false, "no cuLaunchKernelEx", true},
		{"bad setting", h200, true, "yes", false, `pdl = "yes"`, true},
		{"early triggers, removed", h200, true, "early", false, `pdl = "early"`, true},
	} {
		mode, err := dependentLaunches(c.info, c.ex, c.setting)
		if (err != nil) != c.err {
			t.Errorf("%s: error %v, want error %v", c.name, err, c.err)
			continue
		}
		got := mode.Desc
		if err != nil {
			got = err.Error()
		}
		if mode.Dependent != c.on || !strings.Contains(got, c.says) {
			t.Errorf("%s: dependent %v %q, want %v and %q", c.name, mode.Dependent, got, c.on, c.says)
		}
	}
}
