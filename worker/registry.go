package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/dqnflow/dqnflow/activities"
)

// Registry holds the live training runs of one worker process, by run id:
// the trainer (in device memory for a GPU backend), its dataset and how far
// it has gone. The session activities find a run's trainer here between
// activities and across a Continue-As-New that lands on the same worker.
//
// A trainer nobody has used for IdleTimeout is closed, so that a run whose
// workflow went away (terminated, or continued on another worker) does not
// hold device memory for ever; Close closes every trainer on shutdown.
// Registry implements activities.Registry and is safe for concurrent use.
type Registry struct {
	idle   time.Duration
	logger log.Logger

	mu   sync.Mutex
	runs map[string]*activities.Run

	stop chan struct{}
	done chan struct{}
}

// NewRegistry returns an empty registry that evicts trainers idle for
// longer than idle, checking every idle/4 (at least every second). idle <= 0
// disables eviction. logger may be nil.
func NewRegistry(idle time.Duration, logger log.Logger) *Registry {
	r := &Registry{idle: idle, logger: logger, runs: map[string]*activities.Run{}, stop: make(chan struct{}), done: make(chan struct{})}
	if idle <= 0 {
		close(r.done)
		return r
	}
	go r.evictLoop(max(idle/4, time.Second))
	return r
}

// Get returns the run held for id, or nil.
func (r *Registry) Get(id string) *activities.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

// Put holds run under its id, closing the trainer of any other run held
// under that id once its current user unlocks it (or ctx ends; the old run
// is forgotten either way).
func (r *Registry) Put(ctx context.Context, run *activities.Run) error {
	r.mu.Lock()
	old := r.runs[run.ID]
	r.runs[run.ID] = run
	r.mu.Unlock()
	if old == nil || old == run {
		return nil
	}
	if err := old.Lock(ctx); err != nil {
		return err
	}
	defer old.Unlock()
	return old.Close()
}

// Remove forgets run if it is the one held under its id.
func (r *Registry) Remove(run *activities.Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[run.ID] == run {
		delete(r.runs, run.ID)
	}
}

// CloseRun closes and forgets the trainer held for id, unless it is in use
// (then its user decides), and reports whether it did.
func (r *Registry) CloseRun(id, why string) bool {
	run := r.Get(id)
	if run == nil || !run.TryLock() {
		return false
	}
	defer run.Unlock()
	r.mu.Lock()
	held := r.runs[id] == run
	if held {
		delete(r.runs, id)
	}
	r.mu.Unlock()
	if held {
		r.closeRun(run, why)
	}
	return held
}

// Len is the number of runs held.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

// Evict closes and forgets every run not in use whose last use is more than
// the idle timeout before now, and returns how many it evicted. A run in use
// (locked) is left alone.
func (r *Registry) Evict(now time.Time) int {
	if r.idle <= 0 {
		return 0
	}
	r.mu.Lock()
	var stale []*activities.Run
	for _, run := range r.runs {
		if now.Sub(run.LastUsed()) > r.idle {
			stale = append(stale, run)
		}
	}
	r.mu.Unlock()
	n := 0
	for _, run := range stale {
		if !run.TryLock() {
			continue
		}
		r.mu.Lock()
		held := r.runs[run.ID] == run && now.Sub(run.LastUsed()) > r.idle
		if held {
			delete(r.runs, run.ID)
		}
		r.mu.Unlock()
		if held {
			r.closeRun(run, "idle")
			n++
		}
		run.Unlock()
	}
	return n
}

// Close stops eviction and closes every trainer, waiting for runs in use
// until ctx ends. It returns the first error met.
func (r *Registry) Close(ctx context.Context) error {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	r.mu.Lock()
	runs := make([]*activities.Run, 0, len(r.runs))
	for _, run := range r.runs {
		runs = append(runs, run)
	}
	r.runs = map[string]*activities.Run{}
	r.mu.Unlock()
	var errs []error
	for _, run := range runs {
		if err := run.Lock(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, r.closeRun(run, "worker shutdown"))
		run.Unlock()
	}
	return errors.Join(errs...)
}

func (r *Registry) closeRun(run *activities.Run, why string) error {
	err := run.Close()
	if r.logger != nil {
		r.logger.Info("Closed trainer", "run", run.ID, "reason", why, "error", err)
	}
	return err
}

func (r *Registry) evictLoop(every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.Evict(now)
		}
	}
}

var _ activities.Registry = (*Registry)(nil)
