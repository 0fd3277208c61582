package faults

import (
	"strings"
	"testing"
	"time"
)

// TestParseReadsAPlanAndNamesTheBadItem checks the plan syntax of
// DQNFLOW_FAULTS: a valid plan's delays and call numbers, and an error
// naming the item for each kind of mistake.
func TestParseReadsAPlanAndNamesTheBadItem(t *testing.T) {
	p, err := Parse("delay:snapshot=2s, nan-on-train=3,device-error-on-train=5,")
	if err != nil {
		t.Fatal(err)
	}
	if p.Delay["snapshot"] != 2*time.Second || p.NaNOnTrain != 3 || p.DeviceErrorOnTrain != 5 {
		t.Fatalf("Parse: %+v", p)
	}
	if p, err := Parse("device-error-on-train=2@cpu:1"); err != nil || p.DeviceErrorOnTrain != 2 || p.DeviceErrorDevice != "cpu:1" {
		t.Fatalf("Parse of a device's fault: %+v, %v", p, err)
	}
	for _, bad := range []string{"delay:warp=1s", "delay:train=soon", "nan-on-train=0", "explode=1", "nan-on-train",
		"nan-on-train=2@cpu:1", "device-error-on-train=2@"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), EnvPlan) || !strings.Contains(err.Error(), bad) {
			t.Errorf("Parse(%q): %v; want an error naming %s and the item", bad, err, EnvPlan)
		}
	}
}
