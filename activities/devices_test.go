package activities_test

import (
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/trainer"
)

// slotAt is a SlotKeeper whose every session holds a slot on device dev.
type slotAt struct{ dev int }

func (s *slotAt) Hold(string, string, time.Duration) {}
func (s *slotAt) Release(string)                     {}
func (s *slotAt) Device(string, string) (int, bool)  { return s.dev, s.dev >= 0 }

// TestTrainerLivesOnTheDeviceOfItsSlot opens a run's trainer on a worker
// with two devices: it is built by the backend of the device the session's
// slot holds, with that device in its config where the run named another
// CUDA device; it is reused only on that device, and rebuilt on the other
// when the run's slot is there; without a slot the open fails as a lost
// trainer, which makes the workflow open a session again.
func TestTrainerLivesOnTheDeviceOfItsSlot(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	b0, b1 := &activitiestest.Backend{}, &activitiestest.Backend{}
	slot := &slotAt{dev: 1}
	r.a.Backend, r.a.Slots = nil, slot
	r.a.Devices = []trainer.Device{{Name: "cuda:0", Backend: b0}, {Name: "cuda:1", Backend: b1}}
	cfg := testConfig()
	cfg.Device = "cuda:0"

	r.open(activities.OpenInput{Config: cfg})
	if n0, _ := b0.Counts(); n0 != 0 {
		t.Fatal("the trainer was built on cuda:0; the slot holds cuda:1")
	}
	if n1, _ := b1.Counts(); n1 != 1 || b1.Trainers()[0].Config().Device != "cuda:1" {
		t.Fatalf("%d trainers on cuda:1, config device %q; want one, on cuda:1", n1, b1.Trainers()[0].Config().Device)
	}
	if reg := r.reg.Get(runID); reg == nil || reg.Device != "cuda:1" {
		t.Fatalf("the registry holds %+v, want the run on cuda:1", reg)
	}
	if out := r.open(activities.OpenInput{Config: cfg}); !out.Reused {
		t.Fatalf("open on the same device = %+v, want the held trainer", out)
	}

	slot.dev = 0 // the run's next session holds a slot on the other device
	if out := r.open(activities.OpenInput{Config: cfg}); out.Reused {
		t.Fatal("a trainer on cuda:1 was reused for a session whose slot is on cuda:0")
	}
	if n0, _ := b0.Counts(); n0 != 1 || !b1.Trainers()[0].Closed {
		t.Fatalf("%d trainers on cuda:0, the one on cuda:1 closed %v; want the run moved to cuda:0", n0, b1.Trainers()[0].Closed)
	}

	slot.dev = -1
	err := r.do(r.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: cfg}, nil)
	if errType(err) != activities.ErrTypeTrainerLost {
		t.Fatalf("open without a slot: %v, want a %s error", err, activities.ErrTypeTrainerLost)
	}
}
