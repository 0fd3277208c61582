package activities

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDrainEndsTheChunksAndWaitsForThem: Drain cancels every running
// chunk with ErrWorkerStopping, returns only once each has left (after
// its checkpoint write, in RunEpochs), and refuses chunks that come after.
func TestDrainEndsTheChunksAndWaitsForThem(t *testing.T) {
	a := &Trainer{}
	ctx, leave, ok := a.chunks.enter(context.Background())
	if !ok {
		t.Fatal("a chunk was refused before any Drain")
	}
	left := make(chan time.Time, 1)
	go func() {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // the checkpoint write in flight
		left <- time.Now()
		leave()
	}()
	n, err := a.Drain(context.Background())
	drained := time.Now()
	if n != 1 || err != nil {
		t.Fatalf("Drain ended %d chunks (%v), want 1 and no error", n, err)
	}
	if at := <-left; drained.Before(at) {
		t.Errorf("Drain returned %v before the chunk left", at.Sub(drained))
	}
	if c := context.Cause(ctx); !errors.Is(c, ErrWorkerStopping) {
		t.Errorf("the chunk's context ended with %v, want ErrWorkerStopping", c)
	}
	if _, _, ok := a.chunks.enter(context.Background()); ok {
		t.Error("a chunk after Drain was let in")
	}
}

// TestDrainGivesUpAtItsDeadline: a chunk that does not leave holds Drain
// until its context ends, and no longer.
func TestDrainGivesUpAtItsDeadline(t *testing.T) {
	a := &Trainer{}
	_, leave, _ := a.chunks.enter(context.Background())
	defer leave()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if n, err := a.Drain(ctx); n != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain: %d chunks, %v; want 1 and the deadline", n, err)
	}
}

// TestAChunkThatLeavesIsNotDrained: a chunk that ended before Drain is
// neither cancelled nor waited for.
func TestAChunkThatLeavesIsNotDrained(t *testing.T) {
	a := &Trainer{}
	ctx, leave, _ := a.chunks.enter(context.Background())
	leave()
	if n, err := a.Drain(context.Background()); n != 0 || err != nil {
		t.Errorf("Drain: %d chunks, %v; want none", n, err)
	}
	if c := context.Cause(ctx); errors.Is(c, ErrWorkerStopping) {
		t.Errorf("a chunk that had left ended with %v", c)
	}
}
