package backend

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

// Discovery is what a worker found on its host: the devices it trains on,
// one line per device for the log, and how the devices were chosen.
type Discovery struct {
	Devices []trainer.Device
	// Lines describe the devices, one each, in the order of Devices.
	Lines []string
	// Choice says what the --device value selected and why (for "auto",
	// what it tried and what it chose) in one short line; Detail is the
	// full error of what "auto" tried and left, "" when nothing failed.
	Choice, Detail string
}

// Discover finds and opens the devices of a worker started with --device
// device:
//
//   - "cuda": every CUDA device the driver lists (CUDA_VISIBLE_DEVICES
//     narrows the list), each opened; one that does not open is an error.
//   - "cuda:N": CUDA device N only (one worker per GPU).
//   - "auto": every CUDA device that opens, when the driver lists any;
//     otherwise the CPU. Choice says which and why.
//   - "cpu": the CPU backend as one device, or, when cpuDevices >= 1, as
//     cpuDevices stand-in devices "cpu:0" to "cpu:N-1" (StandIn): they share
//     the host's cores and exist so that slot accounting runs on machines
//     without GPUs, in tests and demonstrations.
//
// A device that cannot run is an error, never a silent fallback (auto says
// what it fell back from).
func Discover(device string, cpuDevices int, tu gpu.Tuning) (Discovery, error) {
	if cpuDevices < 0 {
		return Discovery{}, fmt.Errorf("cpu devices %d: want 0 (the CPU as one device) or more", cpuDevices)
	}
	if cpuDevices > 0 && device != "cpu" {
		return Discovery{}, fmt.Errorf("device %q with %d cpu devices: CPU stand-in devices need device cpu", device, cpuDevices)
	}
	switch {
	case device == "cpu":
		return discoverCPU(cpuDevices), nil
	case device == "auto":
		d, err := discoverCUDA(-1, true, tu)
		if err != nil {
			c := discoverCPU(0)
			c.Choice = "auto chose the CPU: " + Unusable(err, "no CUDA device opens")
			c.Detail = err.Error()
			return c, nil
		}
		d.Choice = "auto chose cuda: " + d.Choice
		return d, nil
	case device == "cuda" || strings.HasPrefix(device, "cuda:"):
		ordinal := -1
		if s, ok := strings.CutPrefix(device, "cuda:"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return Discovery{}, fmt.Errorf("device %q: want cuda:N with N a device number", device)
			}
			ordinal = n
		}
		d, err := discoverCUDA(ordinal, false, tu)
		if err != nil {
			return Discovery{}, fmt.Errorf("device %q: %w (%w); use --device cpu", device, err, trainer.ErrUnsupported)
		}
		return d, nil
	}
	return Discovery{}, fmt.Errorf("device %q: want cpu, auto, cuda or cuda:N", device)
}

func discoverCPU(n int) Discovery {
	threads := runtime.GOMAXPROCS(0)
	if n == 0 {
		return Discovery{
			Devices: []trainer.Device{{Name: "cpu", Backend: cpu.Backend{}}},
			Lines:   []string{fmt.Sprintf("cpu: pure-Go reference backend, %d threads", threads)},
			Choice:  "cpu",
		}
	}
	var d Discovery
	for i := range n {
		name := fmt.Sprintf("cpu:%d", i)
		d.Devices = append(d.Devices, trainer.Device{Name: name, Backend: StandIn(cpu.Backend{}, name, i, n)})
		d.Lines = append(d.Lines, fmt.Sprintf("%s: CPU stand-in device %d of %d (pure-Go reference backend; all share the %d threads)", name, i+1, n, threads))
	}
	d.Choice = fmt.Sprintf("cpu as %d stand-in devices", n)
	return d
}

// discoverCUDA opens CUDA device ordinal, or every device when ordinal is
// -1, in tuning tu. With some true, devices that do not open are left out (and named in
// Choice) as long as one opens.
func discoverCUDA(ordinal int, some bool, tu gpu.Tuning) (Discovery, error) {
	infos, err := cuda.Devices()
	if err != nil {
		return Discovery{}, err
	}
	if len(infos) == 0 {
		return Discovery{}, errors.New("the NVIDIA driver loads but finds no CUDA device (check CUDA_VISIBLE_DEVICES and nvidia-smi)")
	}
	if ordinal >= len(infos) {
		return Discovery{}, fmt.Errorf("this machine has %d CUDA device(s), ordinals 0 to %d", len(infos), len(infos)-1)
	}
	if ordinal >= 0 {
		infos = infos[ordinal : ordinal+1]
	}
	var (
		d      Discovery
		failed []string
	)
	for _, info := range infos {
		name := fmt.Sprintf("cuda:%d", info.Ordinal)
		b, err := gpu.NewBackend(info.Ordinal, tu)
		if err != nil {
			if !some {
				return Discovery{}, fmt.Errorf("%s (%s): %w", name, info.Name, err)
			}
			failed = append(failed, fmt.Sprintf("%s (%s): %v", name, info.Name, err))
			continue
		}
		d.Devices = append(d.Devices, trainer.Device{Name: name, Backend: b})
		d.Lines = append(d.Lines, describeCUDA(name, info))
	}
	if len(d.Devices) == 0 {
		return Discovery{}, fmt.Errorf("no CUDA device opens: %s", strings.Join(failed, "; "))
	}
	d.Choice = fmt.Sprintf("%d CUDA device(s)", len(d.Devices))
	if len(failed) > 0 {
		d.Choice += "; left out, since they do not open: " + strings.Join(failed, "; ")
	}
	return d, nil
}

// describeCUDA is a device's log line: name, memory, compute capability.
func describeCUDA(name string, i cuda.DeviceInfo) string {
	return fmt.Sprintf("%s: %s, %.1f GiB, compute capability %d.%d, %d SMs, %s",
		name, i.Name, float64(i.TotalMem)/(1<<30), i.Major, i.Minor, i.SMs, i.UUID)
}
