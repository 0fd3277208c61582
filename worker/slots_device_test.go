package worker

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSessionsSpreadOverDevicesAndKeepTheirs admits sessions on a worker
// with two devices: each takes a slot on the device with the fewest runs,
// no device ever has more runs than runsPerDevice, a session beyond the
// slots is refused, a freed slot goes to the next session on its device,
// and a run that continues as new gets the device of its hold back (where
// the trainer it left is) even when another device is emptier.
func TestSessionsSpreadOverDevicesAndKeepTheirs(t *testing.T) {
	for _, perDevice := range []int{1, 2} {
		t.Run(fmt.Sprintf("runs-per-device=%d", perDevice), func(t *testing.T) {
			s := NewSlots([]string{"cpu:0", "cpu:1"}, perDevice, 0, nil, nil)
			defer s.Close()
			slots := 2 * perDevice
			var got []int
			for i := range slots {
				d, ok := s.open(fmt.Sprintf("s%d", i), fmt.Sprintf("wf%d", i), "r", func() {})
				if !ok {
					t.Fatalf("session %d of %d refused", i+1, slots)
				}
				got = append(got, d)
			}
			want := []int{0, 1, 0, 1}[:slots]
			if !slices.Equal(got, want) {
				t.Fatalf("devices %v, want %v (the emptiest device first)", got, want)
			}
			if _, ok := s.open("extra", "wf-extra", "r", func() {}); ok {
				t.Fatalf("a session beyond the %d slots was admitted; load %v", slots, s.Load())
			}
			if d, ok := s.Device("wf1", "r"); !ok || d != 1 {
				t.Errorf("Device(wf1) = %d, %v; want 1", d, ok)
			}
			// wf1 continues as new: it holds its slot (on device 1) while its
			// session ends, and its next session comes back to device 1.
			s.Hold("wf1", "run-wf1", time.Minute)
			s.close("s1")
			if _, ok := s.open("other", "wf-other", "r", func() {}); ok {
				t.Fatal("the held slot went to another run")
			}
			if d, ok := s.open("s1-next", "wf1", "r2", func() {}); !ok || d != 1 {
				t.Fatalf("the run that held its slot got device %d (admitted %v), want 1", d, ok)
			}
			s.Release("wf1")
			// wf0 ends: the next run takes its slot on device 0.
			s.close("s0")
			if d, ok := s.open("next", "wf-next", "r", func() {}); !ok || d != 0 {
				t.Fatalf("the run after a freed slot got device %d (admitted %v), want 0", d, ok)
			}
			for d, n := range s.Load() {
				if n > perDevice {
					t.Errorf("device %d has %d runs, more than %d", d, n, perDevice)
				}
			}
		})
	}
}

// TestSessionsOfOneRunShareItsDevice: a second session of a workflow that
// has one here (a recreated session while the old one ends) takes no new
// slot and names the same device.
func TestSessionsOfOneRunShareItsDevice(t *testing.T) {
	s := NewSlots([]string{"cuda:0", "cuda:1"}, 1, 0, nil, nil)
	defer s.Close()
	if d, _ := s.open("a", "wf-a", "r1", func() {}); d != 0 {
		t.Fatalf("first session on device %d, want 0", d)
	}
	if d, ok := s.open("a2", "wf-a", "r2", func() {}); !ok || d != 0 {
		t.Fatalf("second session of the same run: device %d, admitted %v; want device 0", d, ok)
	}
	if d, ok := s.open("b", "wf-b", "r1", func() {}); !ok || d != 1 {
		t.Fatalf("another run: device %d, admitted %v; want device 1", d, ok)
	}
	if got := s.Load(); !slices.Equal(got, []int{1, 1}) {
		t.Errorf("load %v, want [1 1]", got)
	}
}

// TestSessionsOfRunsStartedAlikeAreCountedApart: runs started alike
// schedule their session creation activities under the same activity id;
// the slots must still count, and place, their sessions apart.
func TestSessionsOfRunsStartedAlikeAreCountedApart(t *testing.T) {
	s := NewSlots([]string{"cpu:0", "cpu:1"}, 1, 0, nil, nil)
	defer s.Close()
	for i, wf := range []string{"wf-a", "wf-b"} {
		if d, ok := s.open(sessionKey(wf, "r", "5"), wf, "r", func() {}); !ok || d != i {
			t.Fatalf("run %s: device %d, admitted %v; want device %d", wf, d, ok, i)
		}
	}
	if _, ok := s.open(sessionKey("wf-c", "r", "5"), "wf-c", "r", func() {}); ok {
		t.Fatalf("a third run was admitted to two slots; load %v", s.Load())
	}
	for i, wf := range []string{"wf-a", "wf-b"} {
		if d, ok := s.Device(wf, "r"); !ok || d != i {
			t.Errorf("Device(%s) = %d, %v; want %d", wf, d, ok, i)
		}
	}
}

// TestFailedDeviceTakesNoRunsAndItsRunMoves fails one of three devices
// (one run each) under a run: that run's next session, while its old one
// on the failed device is still ending, takes the free device and is named
// there; the failed device admits nothing, the other run keeps its device,
// and once every device failed the worker admits no session at all.
func TestFailedDeviceTakesNoRunsAndItsRunMoves(t *testing.T) {
	s := NewSlots([]string{"cpu:0", "cpu:1", "cpu:2"}, 1, 0, nil, nil)
	defer s.Close()
	for i, wf := range []string{"wf-a", "wf-b"} {
		if d, ok := s.open("s-"+wf, wf, "r", func() {}); !ok || d != i {
			t.Fatalf("run %s: device %d, admitted %v; want %d", wf, d, ok, i)
		}
	}
	s.DeviceFailed("cpu:1", errors.New("injected"))
	if err := s.deviceFailure(); err != nil {
		t.Fatalf("with two devices working the worker refuses runs: %v", err)
	}
	// wf-b recovers: a new session while the old one on cpu:1 ends.
	if d, ok := s.open("s-wf-b-2", "wf-b", "r", func() {}); !ok || d != 2 {
		t.Fatalf("the run of the failed device got device %d (admitted %v), want the free cpu:2", d, ok)
	}
	if d, ok := s.Device("wf-b", "r"); !ok || d != 2 {
		t.Errorf("Device(wf-b) = %d, %v with its old session still on the failed device; want 2", d, ok)
	}
	s.close("s-wf-b")
	if d, ok := s.Device("wf-a", "r"); !ok || d != 0 {
		t.Errorf("the other run moved: Device(wf-a) = %d, %v; want 0", d, ok)
	}
	if got := s.Load(); !slices.Equal(got, []int{1, 0, 1}) {
		t.Errorf("load %v, want [1 0 1]: nothing on the failed device", got)
	}
	if d, ok := s.open("s-wf-c", "wf-c", "r", func() {}); ok {
		t.Fatalf("a third run was admitted on device %d: cpu:1 failed and the others are full", d)
	}
	// A hold on a failed device does not bring the run back to it.
	s.Hold("wf-a", "run-a", time.Minute)
	s.DeviceFailed("cpu:0", errors.New("injected"))
	s.close("s-wf-a")
	if _, ok := s.open("s-wf-a-2", "wf-a", "r2", func() {}); ok {
		t.Fatal("the run held on failed cpu:0 was admitted while the only working device is full")
	}
	s.DeviceFailed("cpu:2", errors.New("injected"))
	if err := s.deviceFailure(); err == nil {
		t.Fatal("every device failed and the worker still takes runs")
	}
	s.close("s-wf-b-2")
	if d, ok := s.open("s-wf-d", "wf-d", "r", func() {}); ok {
		t.Fatalf("a run was admitted on device %d of a worker whose devices all failed", d)
	}
}
