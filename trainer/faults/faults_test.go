package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
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
	if p, err := Parse("hold:temp-synced=3,hold:renamed=2"); err != nil || p.Hold[checkpoint.TempSynced] != 3 || p.Hold[checkpoint.Renamed] != 2 {
		t.Fatalf("Parse of checkpoint write holds: %+v, %v", p, err)
	}
	for _, bad := range []string{"delay:warp=1s", "delay:train=soon", "nan-on-train=0", "explode=1", "nan-on-train",
		"nan-on-train=2@cpu:1", "device-error-on-train=2@", "hold:rename=1", "hold:renamed=0", "hold:temp-synced=x"} {
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

// lockedBuffer is a log that the hook writes from the write's goroutine
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWriteHookHoldsTheNthWrite checks hold:POINT=N on a real directory
// store: the first write passes, the second stops at the point and says
// so in the log, naming the file (the line the chaos tests wait for),
// while that file is in the state the point promises; a cancelled context
// ends the hold and fails the write, leaving no temporary file. A plan
// without holds installs no hook.
func TestWriteHookHoldsTheNthWrite(t *testing.T) {
	if (Plan{}).WriteHook(os.Stderr) != nil {
		t.Fatal("a plan without holds gave a hook")
	}
	ck := &checkpoint.Checkpoint{Tensors: []checkpoint.Tensor{checkpoint.F32Tensor("w", []int{2}, []float32{1, 2})}}
	announced := regexp.MustCompile(`faults: checkpoint write 2 held at (\S+): (\S+) `)
	for _, at := range []checkpoint.WritePoint{checkpoint.TempSynced, checkpoint.Renamed} {
		t.Run(string(at), func(t *testing.T) {
			p, err := Parse("hold:" + string(at) + "=2")
			if err != nil {
				t.Fatal(err)
			}
			var log lockedBuffer
			st := checkpoint.Local(t.TempDir())
			st.Hook = p.WriteHook(&log)
			first, _ := st.Locate("run/epoch-000001.safetensors")
			second, _ := st.Locate("run/epoch-000002.safetensors")
			if _, err := st.Write(context.Background(), first, ck); err != nil {
				t.Fatalf("first write: %v", err)
			}
			if log.String() != "" {
				t.Fatalf("the first write was held: %s", log.String())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := st.Write(ctx, second, ck)
				done <- err
			}()
			var m []string
			deadline := time.Now().Add(time.Minute)
			for m = announced.FindStringSubmatch(log.String()); m == nil; m = announced.FindStringSubmatch(log.String()) {
				select {
				case err := <-done:
					t.Fatalf("the second write ended (%v) without being held; log: %q", err, log.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no hold announced within a minute; log: %q", log.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			file := m[2]
			if m[1] != string(at) {
				t.Fatalf("held at %s, want %s", m[1], at)
			}
			_, finalErr := os.Stat(second)
			_, fileErr := os.Stat(file)
			switch at {
			case checkpoint.TempSynced:
				if filepath.Dir(file) != filepath.Dir(second) || fileErr != nil || !errors.Is(finalErr, os.ErrNotExist) {
					t.Fatalf("held at %s: announced %s (%v), final file %v; want the temporary file there and no final file", at, file, fileErr, finalErr)
				}
			case checkpoint.Renamed:
				if file != second || finalErr != nil {
					t.Fatalf("held at %s: announced %s, final file %v; want %s in place", at, file, finalErr, second)
				}
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("a held write whose context ended: %v, want context.Canceled", err)
			}
			tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(second), ".*.tmp-*"))
			if len(tmps) != 0 {
				t.Fatalf("temporary files left: %v", tmps)
			}
		})
	}
}
