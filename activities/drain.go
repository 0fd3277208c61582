package activities

import (
	"context"
	"errors"
	"sync"
)

// ErrWorkerStopping is the cause with which Trainer.Drain cancels the
// chunks that run on a stopping worker.
var ErrWorkerStopping = errors.New("the worker is stopping")

// chunkSet tracks the RunEpochs chunks running on a worker, so that a
// stopping worker can end them and wait for them before its sessions end
// (Trainer.Drain). Its zero value is ready.
type chunkSet struct {
	mu      sync.Mutex
	stopped bool
	next    int
	cancels map[int]context.CancelCauseFunc
	wg      sync.WaitGroup
}

// enter registers a chunk about to run on ctx. It returns the chunk's
// context, which Drain cancels, and the function to call when the chunk
// has returned; ok is false once the worker is draining.
func (s *chunkSet) enter(ctx context.Context) (_ context.Context, leave func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ctx, nil, false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	if s.cancels == nil {
		s.cancels = map[int]context.CancelCauseFunc{}
	}
	id := s.next
	s.next++
	s.cancels[id] = cancel
	s.wg.Add(1) // under mu, before stopped is set: Drain's Wait never races an Add
	return ctx, func() {
		s.mu.Lock()
		delete(s.cancels, id)
		s.mu.Unlock()
		cancel(nil)
		s.wg.Done()
	}, true
}

// Drain ends the chunks running on this worker and waits for them to
// return, until ctx ends; it returns how many it ended and ctx's error if
// some were still running then. A worker calls it when it stops, before
// it stops its Temporal workers.
//
// A chunk that Drain cancels stops at its next step, discards its trainer
// and returns, as after any cancellation, but only once the checkpoint it
// was writing and its epoch rows are recorded (RunEpochs waits for them).
// Its failure then reaches the workflow while the session is still open,
// so the run reads what the chunk recorded (ChunkLeftovers) after it was
// recorded, and restores the newest checkpoint. Were the sessions to end
// first, the workflow would learn of it at once and could read the store
// before a checkpoint in flight had its row, then train that epoch again.
// Such a chunk fails with ErrTypeWorkerStopping, and a chunk that starts
// after Drain is refused with it.
func (a *Trainer) Drain(ctx context.Context) (int, error) {
	s := &a.chunks
	s.mu.Lock()
	s.stopped = true
	n := len(s.cancels)
	for _, cancel := range s.cancels {
		cancel(ErrWorkerStopping)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return n, nil
	case <-ctx.Done():
		return n, ctx.Err()
	}
}
