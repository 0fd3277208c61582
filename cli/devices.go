package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/worker"
)

// deviceFlags are the flags of a GPU worker that say how many runs it
// takes on its devices.
type deviceFlags struct {
	perDevice int
	// slots is the former name of perDevice (before workers had several
	// devices); still accepted.
	slots int
	// cpuDevices makes the CPU backend stand in for that many devices.
	cpuDevices int
}

func (d *deviceFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&d.perDevice, "runs-per-device", 1, "runs trained at once on each device (each run's trainer lives on one device; --slots is its former name)")
	fs.IntVar(&d.slots, "slots", 0, "deprecated: the former name of --runs-per-device")
	fs.MarkHidden("slots")
	fs.IntVar(&d.cpuDevices, "cpu-devices", 0, "with --device cpu: serve N stand-in devices cpu:0..cpu:N-1 on the CPU backend, to run the slot accounting of an N-GPU worker without GPUs (they share the host's cores)")
}

// runsPerDevice is --runs-per-device, or --slots where only that is given.
func (d *deviceFlags) runsPerDevice() int {
	if d.slots > 0 && d.perDevice == 1 {
		return d.slots
	}
	return d.perDevice
}

// openDevices discovers and opens the devices a worker of these flags
// trains on (none for the control role), before it connects to anything,
// so that a device that cannot run fails the start at once. It logs each
// device and the choice: nothing about the devices is silent.
func (w *workerFlags) openDevices(e *env) ([]trainer.Device, error) {
	role, err := worker.ParseRole(w.role)
	if err != nil {
		return nil, fmt.Errorf("%w: flag --role: %v", errUsage, err)
	}
	if role == worker.RoleControl {
		return nil, nil
	}
	return discoverDevices(e, w.device, w.devices)
}

func discoverDevices(e *env, device string, d deviceFlags) ([]trainer.Device, error) {
	if d.perDevice < 1 {
		return nil, fmt.Errorf("%w: flag --runs-per-device %d: must be at least 1", errUsage, d.perDevice)
	}
	if d.slots < 0 {
		return nil, fmt.Errorf("%w: flag --slots %d: must be at least 1", errUsage, d.slots)
	}
	if d.slots > 0 && d.perDevice != 1 && d.slots != d.perDevice {
		return nil, fmt.Errorf("%w: flags --slots %d and --runs-per-device %d disagree: use --runs-per-device alone", errUsage, d.slots, d.perDevice)
	}
	if d.cpuDevices < 0 {
		return nil, fmt.Errorf("%w: flag --cpu-devices %d: must be 0 or more", errUsage, d.cpuDevices)
	}
	if d.cpuDevices > 0 && device != "cpu" {
		return nil, fmt.Errorf("%w: flag --cpu-devices %d needs --device cpu (got --device %s)", errUsage, d.cpuDevices, device)
	}
	tu, err := gpu.TuningFromEnv()
	if err != nil {
		return nil, err
	}
	found, err := backend.Discover(device, d.cpuDevices, tu)
	if err != nil {
		return nil, err
	}
	for _, line := range found.Lines {
		fmt.Fprintf(e.stderr, "worker: %s\n", line)
	}
	n, per := len(found.Devices), d.runsPerDevice()
	fmt.Fprintf(e.stderr, "worker: device %s: %s; %d device(s) × %d run(s) each = %d slot(s)\n",
		device, found.Choice, n, per, n*per)
	if found.Detail != "" && e.verbose {
		fmt.Fprintf(e.stderr, "worker: device %s: %s\n", device, found.Detail)
	}
	return found.Devices, nil
}
