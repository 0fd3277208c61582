package trainer

import (
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// TestResumeOnAnotherSlotOfTheSameModelStaysExact: a checkpoint written on
// one GPU or CPU stand-in device and restored on another of the same model
// and architecture is as exact as before; another model, backend or
// architecture is not, and the reason names what differs.
func TestResumeOnAnotherSlotOfTheSameModelStaysExact(t *testing.T) {
	h200 := func(ordinal string) string { return "NVIDIA H200 (cuda:" + ordinal + ", sm_90, 132 SMs, 140 GiB)" }
	standIn := func(n string) string {
		return "cpu:" + n + " (stand-in device " + n + " of 3): cpu (2 threads, linux/amd64)"
	}
	cases := []struct {
		was, now, backend string
		exact             bool
	}{
		{h200("0"), h200("1"), "cuda", true},
		{standIn("1"), standIn("2"), "cpu", true},
		{h200("0"), "NVIDIA H100 80GB HBM3 (cuda:0, sm_90, 132 SMs, 80 GiB)", "cuda", false},
		{standIn("1"), "cpu (2 threads, linux/amd64)", "cpu", true},
		{"cpu (2 threads, linux/amd64)", "cpu (4 threads, linux/amd64)", "cpu", false},
	}
	for _, c := range cases {
		meta := Origin(Info{Backend: c.backend, Device: c.was})
		meta[checkpoint.MetaGlobalStep] = "120"
		why := ResumeExactness(meta, Info{Backend: c.backend, Device: c.now})
		if (why == "") != c.exact || (!c.exact && !strings.Contains(why, "device "+c.was+", now "+c.now)) {
			t.Errorf("%q → %q: not bit-exact %q; want exact %v", c.was, c.now, why, c.exact)
		}
	}
}

// TestResumeInAnotherTuningIsNotExact: a CUDA checkpoint restored by a
// backend of another tuning (or one written before the tuning was
// recorded) is no longer bit-exact, and the reason names the tuning; the
// same tuning, or a backend without one, stays exact.
func TestResumeInAnotherTuningIsNotExact(t *testing.T) {
	dev := "NVIDIA H200 (cuda:0, sm_90, 132 SMs, 140 GiB)"
	a, b := `{"loss_slots":4224}`, `{"loss_slots":924}`
	for _, c := range []struct {
		backend, was, now string
		exact             bool
	}{
		{"cuda", a, a, true},
		{"cuda", a, b, false},
		{"cuda", "", a, false},
		{"cpu", "", "", true},
	} {
		meta := Origin(Info{Backend: c.backend, Device: dev, Tuning: c.was})
		if _, ok := meta[checkpoint.MetaTuning]; ok != (c.was != "") {
			t.Errorf("tuning %q: Origin has the tuning key %v", c.was, ok)
		}
		why := ResumeExactness(meta, Info{Backend: c.backend, Device: dev, Tuning: c.now})
		if (why == "") != c.exact || (!c.exact && !strings.Contains(why, "tuning ")) {
			t.Errorf("%s tuning %q → %q: not bit-exact %q; want exact %v", c.backend, c.was, c.now, why, c.exact)
		}
	}
}
