package cuda

// Stream, event and graph flags (cuda.h).
const (
	streamNonBlocking            = 0x1 // CU_STREAM_NON_BLOCKING
	eventDefault                 = 0x0 // CU_EVENT_DEFAULT: records timing
	eventDisableTiming           = 0x2 // CU_EVENT_DISABLE_TIMING: an ordering point only
	streamCaptureModeThreadLocal = 1   // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
)

// legacyStream is CU_STREAM_LEGACY, the legacy default stream, on which the
// synchronous copies (HtoD, DtoH, DtoD) run.
const legacyStream Stream = 0x1

// NewStream creates a stream that does not synchronise with the legacy
// default stream (CU_STREAM_NON_BLOCKING), as graph capture needs.
func (c *Ctx) NewStream() (Stream, error) {
	var s Stream
	err := c.call("cuStreamCreate", func(a *driverAPI) int32 { return a.cuStreamCreate(&s, streamNonBlocking) })
	return s, err
}

// Sync waits for the work queued on s.
func (c *Ctx) Sync(s Stream) error {
	return c.call("cuStreamSynchronize", func(a *driverAPI) int32 { return a.cuStreamSynchronize(s) })
}

// DestroyStream destroys s once its queued work is done.
func (c *Ctx) DestroyStream(s Stream) error {
	return c.call("cuStreamDestroy_v2", func(a *driverAPI) int32 { return a.cuStreamDestroy(s) })
}

// NewEvent creates an event that records timing.
func (c *Ctx) NewEvent() (Event, error) {
	var e Event
	err := c.call("cuEventCreate", func(a *driverAPI) int32 { return a.cuEventCreate(&e, eventDefault) })
	return e, err
}

// NewOrderEvent creates an event without timing (CU_EVENT_DISABLE_TIMING),
// for ordering one stream's work after another's, as the fork and the join
// of a captured graph's branch (WaitEvent).
func (c *Ctx) NewOrderEvent() (Event, error) {
	var e Event
	err := c.call("cuEventCreate", func(a *driverAPI) int32 { return a.cuEventCreate(&e, eventDisableTiming) })
	return e, err
}

// WaitEvent makes the work queued on s after this call wait for e's last
// record. Inside a capture, a record on the capturing stream and a wait on
// another stream fork the graph there; a record on the other stream and a
// wait on the first join it again.
func (c *Ctx) WaitEvent(s Stream, e Event) error {
	return c.call("cuStreamWaitEvent", func(a *driverAPI) int32 { return a.cuStreamWaitEvent(s, e, 0) })
}

// Record records e on s.
func (c *Ctx) Record(e Event, s Stream) error {
	return c.call("cuEventRecord", func(a *driverAPI) int32 { return a.cuEventRecord(e, s) })
}

// Elapsed returns the milliseconds between two recorded, completed events
// (resolution about 0.5 µs).
func (c *Ctx) Elapsed(start, end Event) (ms float32, err error) {
	err = c.call("cuEventElapsedTime", func(a *driverAPI) int32 { return a.cuEventElapsedTime(&ms, start, end) })
	return ms, err
}

// EventSync waits until the work before e's record has completed.
func (c *Ctx) EventSync(e Event) error {
	return c.call("cuEventSynchronize", func(a *driverAPI) int32 { return a.cuEventSynchronize(e) })
}

// DestroyEvent destroys e.
func (c *Ctx) DestroyEvent(e Event) error {
	return c.call("cuEventDestroy_v2", func(a *driverAPI) int32 { return a.cuEventDestroy(e) })
}

// BeginCapture starts capturing the work queued on s into a graph instead of
// running it (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: only this thread's unsafe
// calls, such as Alloc, are refused during the capture). s must not be the
// default stream.
func (c *Ctx) BeginCapture(s Stream) error {
	return c.call("cuStreamBeginCapture_v2", func(a *driverAPI) int32 { return a.cuStreamBeginCapture(s, streamCaptureModeThreadLocal) })
}

// EndCapture ends the capture on s and returns the graph of the captured
// work. Destroy it with DestroyGraph once instantiated.
func (c *Ctx) EndCapture(s Stream) (Graph, error) {
	var g Graph
	err := c.call("cuStreamEndCapture", func(a *driverAPI) int32 { return a.cuStreamEndCapture(s, &g) })
	return g, err
}

// Instantiate makes an executable graph of g.
func (c *Ctx) Instantiate(g Graph) (GraphExec, error) {
	var x GraphExec
	err := c.call("cuGraphInstantiateWithFlags", func(a *driverAPI) int32 { return a.cuGraphInstantiateWithFlags(&x, g, 0) })
	return x, err
}

// GraphLaunch queues one replay of x on s.
func (c *Ctx) GraphLaunch(x GraphExec, s Stream) error {
	return c.call("cuGraphLaunch", func(a *driverAPI) int32 { return a.cuGraphLaunch(x, s) })
}

// DestroyGraph destroys g; executable graphs made from it stay valid.
func (c *Ctx) DestroyGraph(g Graph) error {
	return c.call("cuGraphDestroy", func(a *driverAPI) int32 { return a.cuGraphDestroy(g) })
}

// DestroyGraphExec destroys x.
func (c *Ctx) DestroyGraphExec(x GraphExec) error {
	return c.call("cuGraphExecDestroy", func(a *driverAPI) int32 { return a.cuGraphExecDestroy(x) })
}
