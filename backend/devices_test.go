package backend_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// TestCPUStandsInForDevices: --device cpu --cpu-devices 3 gives three
// devices cpu:0..cpu:2, each building CPU trainers that say, in Info and in
// their checkpoints, which stand-in they run on.
func TestCPUStandsInForDevices(t *testing.T) {
	d, err := backend.Discover("cpu", 3, gpu.DefaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Devices) != 3 || len(d.Lines) != 3 {
		t.Fatalf("%d devices, %d lines; want 3 of each", len(d.Devices), len(d.Lines))
	}
	cfg := trainertest.SmallConfig()
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"cpu:0", "cpu:1", "cpu:2"} {
		dev := d.Devices[i]
		if dev.Name != want || !strings.HasPrefix(d.Lines[i], want+": CPU stand-in") {
			t.Fatalf("device %d: %q, line %q; want %s", i, dev.Name, d.Lines[i], want)
		}
		tr, err := dev.Backend.New(context.Background(), cfg, ds, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		info := tr.Info()
		if !strings.HasPrefix(info.Device, want+" (stand-in device") || info.Backend != "cpu" {
			t.Errorf("device %s: trainer info %+v, want the stand-in named on the cpu backend", want, info)
		}
		ck, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if got := ck.Meta[checkpoint.MetaDevice]; got != info.Device {
			t.Errorf("device %s: checkpoint device %q, want %q", want, got, info.Device)
		}
		// A restore on another stand-in says where it runs now.
		other := d.Devices[(i+1)%3]
		rt, err := other.Backend.Restore(context.Background(), ck, ds)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(rt.Info().Device, other.Name+" ") {
			t.Errorf("restored on %s, the trainer says device %q", other.Name, rt.Info().Device)
		}
		rt.Close()
	}
}

// TestDeviceChoiceIsNeverSilent: on a machine without a usable GPU, cuda
// and cuda:N fail within seconds naming why, auto chooses the CPU and says
// why, and bad values name the value.
func TestDeviceChoiceIsNeverSilent(t *testing.T) {
	if d, err := backend.Discover("cuda", 0, gpu.DefaultTuning()); err == nil {
		t.Skip("this machine has a usable GPU: ", d.Choice)
	}
	for _, dev := range []string{"cuda", "cuda:1"} {
		start := time.Now()
		_, err := backend.Discover(dev, 0, gpu.DefaultTuning())
		if err == nil || !errors.Is(err, trainer.ErrUnsupported) || !strings.Contains(err.Error(), `device "`+dev+`"`) {
			t.Errorf("Discover(%s) = %v; want an unsupported-device error naming %s", dev, err, dev)
		}
		if s := time.Since(start); s > 10*time.Second {
			t.Errorf("Discover(%s) took %s to fail", dev, s)
		}
	}
	d, err := backend.Discover("auto", 0, gpu.DefaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Devices) != 1 || d.Devices[0].Name != "cpu" || !strings.HasPrefix(d.Choice, "auto chose the CPU: ") || len(d.Choice) < 30 {
		t.Errorf("auto without a GPU: %d devices, choice %q; want the CPU with the reason", len(d.Devices), d.Choice)
	}
	for _, c := range []struct {
		device string
		n      int
		want   string
	}{
		{"cuda:x", 0, `device "cuda:x": want cuda:N`},
		{"tpu", 0, `device "tpu": want cpu, auto, cuda or cuda:N`},
		{"cuda", 2, "CPU stand-in devices need device cpu"},
		{"cpu", -1, "cpu devices -1"},
	} {
		if _, err := backend.Discover(c.device, c.n, gpu.DefaultTuning()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Discover(%q, %d) = %v; want an error containing %q", c.device, c.n, err, c.want)
		}
	}
	t.Logf("auto on this machine: %s", d.Choice)
}

// TestEveryGPUIsADeviceOfItsOwn (GPU machines only): --device cuda finds
// every GPU of the host, and trainers built on them at the same time each
// run on their own device, saying so in Info, and train.
func TestEveryGPUIsADeviceOfItsOwn(t *testing.T) {
	d, err := backend.Discover("cuda", 0, gpu.DefaultTuning())
	if err != nil {
		if os.Getenv("DQNFLOW_REQUIRE_GPU") != "" {
			t.Fatal(err)
		}
		t.Skip("no usable GPU: ", err)
	}
	for _, l := range d.Lines {
		t.Log(l)
	}
	t.Log(d.Choice)
	cfg := trainertest.SmallConfig()
	cfg.Device = "cuda"
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		info trainer.Info
		ck   *checkpoint.Checkpoint
		err  error
	}
	res := make([]result, len(d.Devices))
	var wg sync.WaitGroup
	for i, dev := range d.Devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &res[i]
			tr, err := dev.Backend.New(context.Background(), cfg, ds, nil)
			if err != nil {
				r.err = err
				return
			}
			defer tr.Close()
			r.info = tr.Info()
			if _, r.err = tr.Collect(context.Background(), cfg.Env.CollectSteps*8); r.err != nil {
				return
			}
			if _, r.err = tr.Train(context.Background(), 50, nil); r.err != nil {
				return
			}
			r.ck, r.err = tr.Snapshot()
		}()
	}
	wg.Wait()
	for i, dev := range d.Devices {
		r := res[i]
		if r.err != nil {
			t.Fatalf("%s: %v", dev.Name, r.err)
		}
		if !strings.Contains(r.info.Device, "("+dev.Name+",") || r.ck.Meta[checkpoint.MetaDevice] != r.info.Device {
			t.Errorf("%s: trainer says device %q, its checkpoint %q", dev.Name, r.info.Device, r.ck.Meta[checkpoint.MetaDevice])
		}
		t.Logf("%s: %s", dev.Name, r.info.Device)
		if i > 0 {
			same := len(r.ck.Tensors) == len(res[0].ck.Tensors)
			for j := 0; same && j < len(r.ck.Tensors); j++ {
				same = bytes.Equal(r.ck.Tensors[j].Data, res[0].ck.Tensors[j].Data)
			}
			t.Logf("%s and %s, same seed, trained at the same time: states bit-identical: %v", d.Devices[0].Name, dev.Name, same)
		}
	}
}
