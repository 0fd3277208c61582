package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/trainer"
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

// TestTextGivesTheInjectedErrorAnyBytes checks text=HEX[*N]: the bytes a
// NaN fault's error quotes, the repetition, and the refusals (not hex, a
// bad count, an expansion over MaxText).
func TestTextGivesTheInjectedErrorAnyBytes(t *testing.T) {
	for _, c := range []struct{ plan, want string }{
		{"text=00", "\x00"},
		{"text=fffe4100", "\xff\xfeA\x00"},
		{"text=41*5", "AAAAA"},
	} {
		p, err := Parse("nan-on-train=1," + c.plan)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.plan, err)
		}
		f := &faulty{b: &Backend{Plan: p}}
		_, err = f.Train(context.Background(), 1, nil)
		if !errors.Is(err, trainer.ErrNonFinite) || !strings.Contains(err.Error(), ", text: "+c.want+"): loss is NaN") {
			t.Errorf("%s: the injected error is %q; want a NonFinite one quoting %q", c.plan, err, c.want)
		}
	}
	if p, _ := Parse("text=41*1048576"); len(p.Text) != 1<<20 {
		t.Errorf("text=41*1048576 is %d bytes, want 1 MiB", len(p.Text))
	}
	for _, bad := range []string{"text=", "text=0", "text=zz", "text=41*0", "text=41*x", fmt.Sprintf("text=4142*%d", MaxText/2+1)} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), EnvPlan) {
			t.Errorf("Parse(%q): %v; want an error naming %s", bad, err, EnvPlan)
		}
	}
}
