package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/activities"
)

// sessionCreationActivity is the Go SDK's activity that holds a session
// on a worker: it runs, heartbeating, for the session's whole life, and
// the worker's session token (one of MaxConcurrentSessionExecutionSize) is
// taken when it starts and given back when it returns. The name is the
// SDK's internal one (go.temporal.io/sdk/internal/session.go), stable since
// sessions exist; TestSlotIsKeptAcrossContinueAsNew fails if it changes.
const sessionCreationActivity = "internalSessionCreationActivity"

// Slots is a GPU worker's account of its sessions, on top of the SDK's own
// (ADR 0001). Installed as a worker interceptor, it sees every session
// creation and every activity of a session on this worker, and adds two
// rules to the SDK's limit of Slots sessions at once:
//
//   - Hold: a run that continues as new holds its slot for the new run
//     (activities.Trainer.HoldSlot), for a limited time. While held, the
//     slot is refused to any other workflow's session, so the new run's
//     RecreateSession gets it back, and the trainer it left in memory is
//     used again, instead of a queued run taking the slot the moment the
//     old session completes. A hold ends when the run's new session opens
//     its trainer, or at its deadline, when the trainer it kept is closed
//     (its slot has gone to someone else).
//   - Idle: a session in which no activity has run for Idle is ended (its
//     creation activity is cancelled, so the SDK frees the slot and the
//     workflow sees the session fail). A workflow that stopped making
//     progress, for example one whose workflow task fails on a
//     non-determinism error after a bad deploy, otherwise keeps its session
//     heartbeating and the slot taken until the session's execution
//     timeout (7 days). When it makes progress again it recovers from its
//     last checkpoint on any worker.
//
// A refused session creation fails with the retryable error the SDK gives
// when a worker has no free slot, so the server offers it again, to any
// worker, as it would anyway.
//
// The slots are spread over the worker's devices, runsPerDevice each. A
// session admitted takes a slot on the device with the fewest runs (the
// first such), and keeps that device for its whole life; a hold keeps it
// for the run's next session, whose trainer is the one left in that
// device's memory. The session's activities ask Device which one it is
// (activities.Trainer.OpenTrainer builds the run's trainer there).
type Slots struct {
	interceptor.WorkerInterceptorBase

	devices       []string // names, for the log
	runsPerDevice int
	slots         int // len(devices) · runsPerDevice
	idle          time.Duration
	registry      *Registry
	logger        log.Logger
	now           func() time.Time

	mu       sync.Mutex
	sessions map[string]*sessionEntry // by sessionKey of the creation activity
	holds    map[string]hold          // by workflow id
	failed   map[int]error            // by device: the failure that took it out of service

	stop chan struct{}
	done chan struct{}
}

type sessionEntry struct {
	workflowID, runID string
	device            int // index in the worker's devices
	cancel            context.CancelFunc
	busy              int       // activities of the session running now
	lastUsed          time.Time // when the last one ended, or the session began
}

type hold struct {
	runID    string // the registry key of the trainer kept for the new run
	device   int    // where that trainer is; -1 when unknown
	deadline time.Time
}

// NewSlots returns the session account of a GPU worker with runsPerDevice
// slots (at least 1) on each of devices (their names; at least one, and
// one unnamed device when empty). Sessions idle for longer than idle are
// ended, checking every idle/4 (at least every second); idle <= 0 disables
// that. The trainer a hold kept is closed through registry when the hold
// expires. logger may be nil.
func NewSlots(devices []string, runsPerDevice int, idle time.Duration, registry *Registry, logger log.Logger) *Slots {
	if len(devices) == 0 {
		devices = []string{""}
	}
	runsPerDevice = max(runsPerDevice, 1)
	s := &Slots{
		devices: devices, runsPerDevice: runsPerDevice, slots: len(devices) * runsPerDevice,
		idle: idle, registry: registry, logger: logger, now: time.Now,
		sessions: map[string]*sessionEntry{}, holds: map[string]hold{}, failed: map[int]error{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	every := time.Second
	if idle > 0 {
		every = max(idle/4, time.Second)
	}
	go s.sweepLoop(every)
	return s
}

// Hold keeps a slot for the next run of workflow workflowID for d; runID
// is the registry key of the trainer kept for it. It implements
// activities.SlotKeeper.
func (s *Slots) Hold(workflowID, runID string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dev := -1
	for _, e := range s.sessions {
		if e.workflowID == workflowID {
			dev = e.device
		}
	}
	s.holds[workflowID] = hold{runID: runID, device: dev, deadline: s.now().Add(d)}
}

// Release ends workflowID's hold: its new session has opened its trainer.
// It implements activities.SlotKeeper.
func (s *Slots) Release(workflowID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holds, workflowID)
}

// Device returns the index of the device whose slot the session of
// workflow execution workflowID/runID holds (of workflowID's session
// when that execution has none here). It implements
// activities.SlotKeeper.
func (s *Slots) Device(workflowID, runID string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A run that moved off a failed device may briefly have its old
	// session there beside its new one: a working device ranks first,
	// then the session of this very execution.
	rank := func(e *sessionEntry) int {
		r := 0
		if s.failed[e.device] == nil {
			r += 2
		}
		if e.runID == runID {
			r++
		}
		return r
	}
	var best *sessionEntry
	for _, e := range s.sessions {
		if e.workflowID == workflowID && (best == nil || rank(e) > rank(best)) {
			best = e
		}
	}
	if best == nil {
		return -1, false
	}
	return best.device, true
}

// Load returns how many runs hold a slot on each device now (sessions and
// holds, counted by workflow), in the order of the devices.
func (s *Slots) Load() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load("")
}

// load counts the workflows with a session or a hold on each device,
// leaving out workflow except. The caller holds mu.
func (s *Slots) load(except string) []int {
	on := map[string]int{}
	for _, e := range s.sessions {
		on[e.workflowID] = e.device
	}
	for w, h := range s.holds {
		if _, ok := on[w]; !ok {
			on[w] = h.device
		}
	}
	delete(on, except)
	n := make([]int, len(s.devices))
	for _, d := range on {
		if d < 0 {
			d = s.least(n) // a hold whose device is unknown takes a slot somewhere
		}
		if d >= 0 {
			n[d]++
		}
	}
	return n
}

// least is the first working device with the fewest runs in load; -1
// when every device failed. The caller holds mu.
func (s *Slots) least(load []int) int {
	best := -1
	for d, n := range load {
		if s.failed[d] == nil && (best < 0 || n < load[best]) {
			best = d
		}
	}
	return best
}

// open admits the session id of workflow execution workflowID/runID, if
// a slot allows it, and records it on its device: the device of the
// workflow's hold or of its other session here, when it has one; else the
// device with the fewest runs, when that has a free slot. Sessions and
// holds are counted by workflow, so a run's hold and its new session take
// one slot. Admission and record are one step, so that sessions created at
// once never share a slot.
func (s *Slots) open(id, workflowID, runID string, cancel context.CancelFunc) (device int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	device, ok = s.admit(workflowID)
	if ok {
		s.sessions[id] = &sessionEntry{workflowID: workflowID, runID: runID, device: device, cancel: cancel, lastUsed: s.now()}
	}
	return device, ok
}

// admit is open's decision. A failed device admits nothing: the session
// or hold of a run on it does not keep it there, and the run takes a slot
// on a working device like a new one. The caller holds mu.
func (s *Slots) admit(workflowID string) (device int, ok bool) {
	for _, e := range s.sessions {
		if e.workflowID == workflowID && s.failed[e.device] == nil {
			return e.device, true
		}
	}
	load := s.load(workflowID)
	d := s.least(load)
	if d < 0 {
		return -1, false
	}
	if h, held := s.holds[workflowID]; held && (h.device < 0 || s.failed[h.device] == nil) {
		if h.device >= 0 {
			return h.device, true
		}
		return d, true
	}
	return d, load[d] < s.runsPerDevice
}

// close forgets session id.
func (s *Slots) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (s *Slots) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &slotsInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, s: s}
}

type slotsInbound struct {
	interceptor.ActivityInboundInterceptorBase
	s *Slots
}

func (i *slotsInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	w := info.WorkflowExecution
	if info.ActivityType.Name == sessionCreationActivity {
		return i.s.session(ctx, sessionKey(w.ID, w.RunID, info.ActivityID), w.ID, w.RunID, func(ctx context.Context) (any, error) {
			return i.Next.ExecuteActivity(ctx, in)
		})
	}
	i.s.begin(w.ID, w.RunID)
	defer i.s.end(w.ID, w.RunID)
	return i.Next.ExecuteActivity(ctx, in)
}

// sessionKey identifies a session creation activity on this worker. An
// activity id is unique only within its workflow execution: runs started
// alike schedule their session creations under the same ids.
func sessionKey(workflowID, runID, activityID string) string {
	return workflowID + "\x00" + runID + "\x00" + activityID
}

// DeviceFailed takes the device named device out of service: it failed
// (trainer.ErrDevice). Its slots admit no more sessions; the run that
// failed there opens a new session, on another device of this worker when
// one has a free slot, else on another worker, and resumes from its last
// checkpoint. The other devices' runs go on. Once every device failed, every
// session creation is refused, with the same retryable error as a full
// worker's, and goes to another worker. It implements
// activities.DeviceFailer. Restarting the worker (after the device is
// fixed or drained) is the way back.
func (s *Slots) DeviceFailed(device string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d, name := range s.devices {
		if name != device || s.failed[d] != nil {
			continue
		}
		s.failed[d] = cause
		if len(s.failed) == len(s.devices) {
			s.warn("Device failed: this worker refuses new runs until it is restarted", "device", name, "error", cause)
		} else {
			s.warn("Device failed: its slots take no more runs until the worker is restarted; the other devices go on",
				"device", name, "working_devices", len(s.devices)-len(s.failed), "error", cause)
		}
	}
}

// deviceFailure is the failure of the last device to fail once every
// device of the worker has failed, or nil while one works.
func (s *Slots) deviceFailure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) < len(s.devices) {
		return nil
	}
	var last error
	for d := range s.devices {
		last = s.failed[d]
	}
	return last
}

// session runs a session's creation activity (its whole life) if admit
// allows it, under a context the idle sweep can cancel.
func (s *Slots) session(ctx context.Context, id, workflowID, runID string, run func(context.Context) (any, error)) (any, error) {
	if err := s.deviceFailure(); err != nil {
		return nil, temporal.NewApplicationError(
			fmt.Sprintf("too many outstanding sessions: this worker's devices failed (%v) and it takes no runs until restarted", err),
			"", nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dev, ok := s.open(id, workflowID, runID, cancel)
	if !ok {
		return nil, temporal.NewApplicationError(
			fmt.Sprintf("too many outstanding sessions: every slot of this worker is taken or held for a run that continues as new (%d slots)", s.slots),
			"", nil)
	}
	defer s.close(id)
	if len(s.devices) > 1 {
		s.info("A run took a slot", "workflow", workflowID, "device", s.devices[dev])
	}
	return run(ctx)
}

func (s *Slots) begin(workflowID, runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.sessions {
		if e.workflowID == workflowID && e.runID == runID {
			e.busy++
		}
	}
}

func (s *Slots) end(workflowID, runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.sessions {
		if e.workflowID == workflowID && e.runID == runID {
			e.busy--
			e.lastUsed = s.now()
		}
	}
}

// Sweep ends the sessions idle for longer than the idle limit and the
// holds past their deadline (closing the trainers they kept), as of now.
// It returns how many of each it ended.
func (s *Slots) Sweep(now time.Time) (sessions, holds int) {
	var expired []hold
	s.mu.Lock()
	for id, e := range s.sessions {
		if s.idle > 0 && e.busy == 0 && now.Sub(e.lastUsed) > s.idle {
			s.warn(fmt.Sprintf("Ending a GPU session nobody used for %s: its workflow makes no progress "+
				"(a failing workflow task? see the Temporal UI); the slot is free again, and the run recovers "+
				"from its last checkpoint when it goes on", s.idle), "workflow", e.workflowID, "run", e.runID)
			e.cancel()
			delete(s.sessions, id)
			sessions++
		}
	}
	for w, h := range s.holds {
		if now.After(h.deadline) {
			delete(s.holds, w)
			expired = append(expired, h)
		}
	}
	s.mu.Unlock()
	for _, h := range expired {
		s.warn("The run that continued as new did not come back for its slot; closing the trainer kept for it", "run", h.runID)
		if s.registry != nil {
			s.registry.CloseRun(h.runID, "slot hold expired")
		}
		holds++
	}
	return sessions, holds
}

// Close stops the sweeps.
func (s *Slots) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *Slots) sweepLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.Sweep(now)
		}
	}
}

func (s *Slots) info(msg string, kv ...any) {
	if s.logger != nil {
		s.logger.Info(msg, kv...)
	}
}

func (s *Slots) warn(msg string, kv ...any) {
	if s.logger != nil {
		s.logger.Warn(msg, kv...)
	}
}

var _ activities.SlotKeeper = (*Slots)(nil)
