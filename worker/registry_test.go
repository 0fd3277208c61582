package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/worker"
)

func newRun(t *testing.T, b *activitiestest.Backend, id string) (*activities.Run, *activitiestest.Trainer) {
	t.Helper()
	tr, err := b.New(context.Background(), config.Defaults(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return activities.NewRun(id, config.Defaults(), tr, nil, 0, 0), tr.(*activitiestest.Trainer)
}

func TestIdleTrainersAreEvictedButNotOnesInUse(t *testing.T) {
	reg := worker.NewRegistry(time.Hour, nil)
	defer reg.Close(context.Background())
	b := &activitiestest.Backend{}
	idle, idleTr := newRun(t, b, "idle")
	busy, busyTr := newRun(t, b, "busy")
	ctx := context.Background()
	for _, r := range []*activities.Run{idle, busy} {
		if err := reg.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.Evict(time.Now().Add(time.Minute)); n != 0 || reg.Len() != 2 {
		t.Fatalf("evicted %d fresh trainers", n)
	}
	if err := busy.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := reg.Evict(time.Now().Add(2 * time.Hour)); n != 1 {
		t.Fatalf("evicted %d trainers after the idle timeout, want 1 (the other is in use)", n)
	}
	if !idleTr.Closed || reg.Get("idle") != nil {
		t.Error("the idle trainer is still held")
	}
	if busyTr.Closed || reg.Get("busy") != busy {
		t.Error("a trainer in use was evicted")
	}
	busy.Unlock()
}

func TestPutReplacesAndClosesTheRunsOldTrainer(t *testing.T) {
	reg := worker.NewRegistry(0, nil)
	b := &activitiestest.Backend{}
	old, oldTr := newRun(t, b, "r")
	next, nextTr := newRun(t, b, "r")
	ctx := context.Background()
	if err := reg.Put(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := reg.Put(ctx, next); err != nil {
		t.Fatal(err)
	}
	if !oldTr.Closed || nextTr.Closed || reg.Get("r") != next {
		t.Errorf("after replacing: old closed %v, new closed %v; want only the old one closed", oldTr.Closed, nextTr.Closed)
	}
	reg.Remove(old) // no longer held: must not forget the new one
	if reg.Get("r") != next {
		t.Error("removing a replaced run forgot its successor")
	}
	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !nextTr.Closed || reg.Len() != 0 {
		t.Error("Close left a trainer open")
	}
}

// TestSlotHoldEndsWithTheTrainerItKept holds a slot for a run that
// continued as new and never came back: at the hold's deadline the trainer
// kept for it is closed (its slot may go to another run, its device memory
// must follow), while a hold that its run released keeps nothing closed.
func TestSlotHoldEndsWithTheTrainerItKept(t *testing.T) {
	reg := worker.NewRegistry(0, nil)
	defer reg.Close(context.Background())
	slots := worker.NewSlots(nil, 1, 0, reg, nil)
	defer slots.Close()
	b := &activitiestest.Backend{}
	gone, goneTr := newRun(t, b, "gone")
	back, backTr := newRun(t, b, "back")
	for _, r := range []*activities.Run{gone, back} {
		if err := reg.Put(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	slots.Hold("wf-gone", "gone", time.Minute)
	slots.Hold("wf-back", "back", time.Minute)
	slots.Release("wf-back") // its new run opened its trainer
	if _, holds := slots.Sweep(time.Now()); holds != 0 || goneTr.Closed {
		t.Fatalf("a hold ended before its deadline (%d ended)", holds)
	}
	if _, holds := slots.Sweep(time.Now().Add(2 * time.Minute)); holds != 1 || !goneTr.Closed || reg.Get("gone") != nil {
		t.Fatalf("after the deadline: %d holds ended, trainer closed %v; want the kept trainer closed", holds, goneTr.Closed)
	}
	if backTr.Closed || reg.Get("back") == nil {
		t.Error("the trainer of a run that came back was closed")
	}
}
