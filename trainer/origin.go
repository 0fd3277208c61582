package trainer

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// Origin returns the checkpoint metadata that says where a checkpoint was
// written: the backend, the device, the process's architecture
// (GOOS/GOARCH) and, for a backend that has one, its tuning (Info.Tuning).
// A resume is bit-identical only where all are the same: floating-point
// results depend on the device's kernels and their tuning (the loss's
// block count, the gradients' k chunks), and on the CPU on the
// architecture (gonum's arm64 kernels use fused multiply-add, its amd64
// kernels do not; docs/reliability.md).
func Origin(info Info) map[string]string {
	m := map[string]string{
		checkpoint.MetaBackend: info.Backend,
		checkpoint.MetaDevice:  info.Device,
		checkpoint.MetaArch:    runtime.GOOS + "/" + runtime.GOARCH,
	}
	if info.Tuning != "" {
		m[checkpoint.MetaTuning] = info.Tuning
	}
	return m
}

// ResumeExactness compares the origin recorded in a checkpoint's metadata
// (Origin) with info, the trainer that restored it in this process, and
// returns why the resumed run is no longer bit-exact, or "" when it is as
// exact as it was. The reason a checkpoint already carries
// (checkpoint.MetaNotBitExact) is kept: once a run has moved it stays
// inexact. A key the checkpoint lacks (written before it was recorded)
// counts as unknown, hence as a difference. Devices are compared without
// the slot's identity (deviceModel): a run that moves from one GPU of a
// model to another of the same model and architecture runs the same
// kernels, and CPU stand-in devices are all the one CPU.
func ResumeExactness(meta map[string]string, info Info) string {
	var diffs []string
	for _, k := range []string{checkpoint.MetaBackend, checkpoint.MetaDevice, checkpoint.MetaArch, checkpoint.MetaTuning} {
		was, now := meta[k], Origin(info)[k]
		if k == checkpoint.MetaDevice && was != "" && deviceModel(was) == deviceModel(now) {
			continue
		}
		if was != now {
			if was == "" {
				was = "unrecorded"
			}
			diffs = append(diffs, fmt.Sprintf("%s %s, now %s", k, was, now))
		}
	}
	prior := meta[checkpoint.MetaNotBitExact]
	if len(diffs) == 0 {
		return prior
	}
	why := fmt.Sprintf("resumed at global step %s from a checkpoint written elsewhere (%s)",
		meta[checkpoint.MetaGlobalStep], strings.Join(diffs, "; "))
	if prior != "" {
		why = prior + "; " + why
	}
	return why
}

// slotIdentity matches what names one device among equals in a device
// description: a CUDA ordinal ("NVIDIA H200 (cuda:1, sm_90, …)", from
// gpu.Backend) and a CPU stand-in's name and number ("cpu:1 (stand-in
// device 2 of 3): …", from backend.StandIn).
var slotIdentity = regexp.MustCompile(`^cpu:\d+ \(stand-in device \d+ of \d+\): |cuda:\d+, `)

// deviceModel is a device description without its slot identity: what
// decides the arithmetic the device does.
func deviceModel(desc string) string {
	return slotIdentity.ReplaceAllString(desc, "")
}
