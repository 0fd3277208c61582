package runview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// WatchOptions say where Watch reads and writes.
type WatchOptions struct {
	// Store holds the run's stored epochs; StoreErr is why there is none
	// (Store is then nil).
	Store    store.Reader
	StoreErr error
	// Where is the Temporal server, for the errors.
	Where Where
	// Stdout receives the lines (redrawn in place when TTY) or, with
	// JSON, a JSON object per change; Stderr the notes.
	Stdout, Stderr io.Writer
	TTY, JSON      bool
}

// Where names a Temporal server and namespace in errors.
type Where struct{ Address, Namespace string }

// Watch shows the run's progress until it ends, then its result, which
// it returns. Epoch metrics that only the store has (ε, steps/s) come from
// the metadata store when one is found; without one the lines show less.
func Watch(ctx context.Context, c client.Client, id string, o WatchOptions) (workflows.RunResult, error) {
	var res workflows.RunResult
	jsonOut := o.JSON
	if _, err := c.DescribeWorkflowExecution(ctx, id, ""); IsNotFound(err) {
		return res, NotOnTemporal(ctx, o.Store, o.StoreErr, o.Where, id)
	}
	run := c.GetWorkflow(ctx, id, "")
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, &res) }()

	w := &watcher{w: o.Stdout, tty: o.TTY, epsilon: math.NaN(), meanQ: math.NaN()}
	if st, err := o.Store, o.StoreErr; err == nil {
		w.epochs = func(runID string) []metadata.Epoch {
			eps, _ := st.ListEpochs(ctx, runID)
			return eps
		}
	} else {
		fmt.Fprintf(o.Stderr, "run watch: no metadata store (%v); epoch lines show what Temporal reports\n", err)
	}
	every := time.Second
	if w.tty {
		every = 250 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastJSON string
	for {
		select {
		case err := <-done:
			// The epochs that ended since the last sample: a closed run
			// still answers the query while a worker runs.
			if !jsonOut {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if p, _, qerr := Progress(qctx, c, id); qerr == nil {
					w.update(time.Now(), p, nil)
				}
				cancel()
			}
			w.finish()
			if jsonOut {
				out := map[string]any{"run_id": id, "result": res}
				if err != nil {
					out["error"] = err.Error()
				}
				jsonfile.Print(o.Stdout, out)
			}
			if err != nil {
				return res, fmt.Errorf("run %s failed: %w", id, err)
			}
			if !jsonOut {
				fmt.Fprintf(o.Stdout, "run %s %s: %d epochs, best validation Sharpe %.3f at epoch %d, last checkpoint %s\n",
					id, res.Status, res.Epochs, res.BestValidSharpe, res.BestEpoch, ckURI(res.LastCheckpoint))
			}
			return res, nil
		case <-ctx.Done():
			w.finish()
			return res, ctx.Err()
		case now := <-tick.C:
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			p, live, err := Progress(qctx, c, id)
			cancel()
			if err != nil {
				continue // the first workflow task may not have run yet
			}
			if jsonOut {
				key := fmt.Sprintf("%s %s %d %v", p.Status, p.Phase, p.Epoch, live)
				if key != lastJSON {
					lastJSON = key
					jsonfile.Print(o.Stdout, map[string]any{"progress": p, "training": live})
				}
				continue
			}
			w.update(now, p, live)
		}
	}
}

// IsNotFound reports whether err is Temporal's answer for a workflow
// that it does not know.
func IsNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// NoSuchRun is the error for a run that neither Temporal nor the metadata
// store knows.
func NoSuchRun(where Where, id string) error {
	return fmt.Errorf("run %s does not exist: Temporal at %s (namespace %s) has no workflow %s, and the metadata store no run %s (\"dqnflow run list\" lists the runs)",
		id, where.Address, where.Namespace, id, id)
}

// NotOnTemporal is the error for run id, whose workflow Temporal does
// not know: a run the metadata store recorded (its history past the
// namespace's retention, or kept by another server), none at all, or, when
// the store cannot answer, what it said (as "run show" does).
func NotOnTemporal(ctx context.Context, st store.Reader, err error, where Where, id string) error {
	var r metadata.Run
	if err == nil {
		r, err = st.GetRun(ctx, id)
	}
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return NoSuchRun(where, id)
	case err != nil:
		return fmt.Errorf("run %s: Temporal at %s (namespace %s) has no workflow %s; metadata store: %w", id, where.Address, where.Namespace, id, err)
	}
	return fmt.Errorf("run %s (%s) is not on Temporal at %s (namespace %s): its history is past the namespace's retention, or another server ran it; \"dqnflow run show %s\" shows what the metadata store holds",
		id, r.Status, where.Address, where.Namespace, id)
}

// watcher draws "run watch": finished epochs as lines, the epoch in
// training as one line redrawn in place (terminal only), and status or
// phase changes as lines.
type watcher struct {
	w   io.Writer
	tty bool
	// epochs returns the run's stored epochs; nil when there is no store.
	epochs func(runID string) []metadata.Epoch

	printed   int    // epochs printed
	state     string // last status and phase printed
	liveDrawn bool   // a live line is on the screen, without a newline
	// rate is the gradient steps per second of the epoch in training,
	// from two heartbeats.
	lastStep int64
	lastAt   time.Time
	rate     float64
	// epsilon is the exploration rate at the end of the last stored
	// epoch (the next one starts there); NaN when unknown.
	epsilon float64
	// meanQ is the last stored epoch's mean Q; NaN when unknown.
	meanQ float64
}

// update takes one sample of the run's progress.
func (w *watcher) update(now time.Time, p workflows.Progress, live *activities.Heartbeat) {
	if p.Epoch > w.printed {
		var stored map[int]metadata.Epoch
		if w.epochs != nil {
			stored = map[int]metadata.Epoch{}
			eps := w.epochs(p.RunID)
			for _, ep := range eps {
				stored[ep.Epoch] = ep
			}
			for i := range eps {
				if r := stepsPerSecond(eps, i); r > 0 {
					m := eps[i].Metrics
					if m == nil {
						m = map[string]float64{}
					}
					m["steps_per_second"] = r
					eps[i].Metrics = m
					stored[eps[i].Epoch] = eps[i]
				}
			}
		}
		if ep, ok := stored[p.Epoch]; ok {
			if v, ok := ep.Metrics["epsilon"]; ok {
				w.epsilon = v
			}
			if v, ok := ep.Metrics["mean_q"]; ok {
				w.meanQ = v
			}
		}
		w.clearLive()
		for e := w.printed + 1; e <= p.Epoch; e++ {
			fmt.Fprintln(w.w, epochLine(p, e, stored))
		}
		w.printed = p.Epoch
	}
	state := fmt.Sprintf("%s/%s", p.Status, p.Phase)
	// A terminal status is left to the result line that follows it.
	if state != w.state && (!w.tty || live == nil) && !p.Status.Terminal() {
		w.clearLive()
		fmt.Fprintf(w.w, "run %s [%s] %s, epoch %d of %d%s\n", p.RunID, p.Status, p.Phase, min(p.Epoch+1, p.Epochs), p.Epochs, deviceNote(p))
	}
	w.state = state
	if !w.tty || live == nil {
		return
	}
	if live.GlobalStep > w.lastStep && !w.lastAt.IsZero() {
		if dt := now.Sub(w.lastAt).Seconds(); dt > 0 {
			w.rate = float64(live.GlobalStep-w.lastStep) / dt
		}
	}
	if live.GlobalStep != w.lastStep {
		w.lastStep, w.lastAt = live.GlobalStep, now
	}
	fmt.Fprintf(w.w, "\r\033[K%s", liveLine(p, live, w.rate, w.meanQ, w.epsilon))
	w.liveDrawn = true
}

// finish ends a live line with a newline.
func (w *watcher) finish() { w.clearLive() }

func (w *watcher) clearLive() {
	if w.liveDrawn {
		fmt.Fprint(w.w, "\r\033[K")
		w.liveDrawn = false
	}
}

// epochLine describes finished epoch e: from the store when it has the
// epoch, else the little progress says about the latest one.
func epochLine(p workflows.Progress, e int, stored map[int]metadata.Epoch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d/%d done", e, p.Epochs)
	ep, ok := stored[e]
	if !ok {
		if e == p.Epoch {
			fmt.Fprintf(&b, "  step %d  loss %.4f", p.Step, p.Loss)
			if p.BestEpoch > 0 {
				fmt.Fprintf(&b, "  valid Sharpe %.3f  best %.3f @%d", p.LastValidSharpe, p.BestValidSharpe, p.BestEpoch)
			}
		}
		return b.String()
	}
	fmt.Fprintf(&b, "  step %d", ep.GlobalStep)
	if r, ok := ep.Metrics["steps_per_second"]; ok {
		fmt.Fprintf(&b, "  %.1f steps/s", r)
	}
	fmt.Fprintf(&b, "  loss %.4f  grad norm %.3f", ep.Loss, ep.GradNorm)
	if q, ok := ep.Metrics["mean_q"]; ok {
		fmt.Fprintf(&b, "  mean Q %.4f", q)
	}
	if eps, ok := ep.Metrics["epsilon"]; ok {
		fmt.Fprintf(&b, "  ε %.3f", eps)
	}
	if ep.ValidSharpe != nil {
		fmt.Fprintf(&b, "  valid Sharpe %.3f", *ep.ValidSharpe)
	}
	if p.BestEpoch > 0 && p.BestEpoch <= e {
		fmt.Fprintf(&b, "  best %.3f @%d", p.BestValidSharpe, p.BestEpoch)
	}
	fmt.Fprintf(&b, "  %s", (time.Duration(ep.DurationMS) * time.Millisecond).String())
	return b.String()
}

// liveLine is the epoch in training: a bar of its steps, the rate, the
// latest loss and the last validation Sharpe.
func liveLine(p workflows.Progress, live *activities.Heartbeat, rate, meanQ, epsilon float64) string {
	const width = 24
	frac := 0.0
	if live.Steps > 0 {
		frac = min(float64(live.Step)/float64(live.Steps), 1)
	}
	filled := int(frac * width)
	bar := strings.Repeat("=", filled)
	if filled < width {
		bar += ">" + strings.Repeat(" ", width-filled-1)
	}
	s := fmt.Sprintf("epoch %d/%d [%s] %s %d/%d", live.Epoch, p.Epochs, bar, live.Stage, live.Step, live.Steps)
	if rate > 0 {
		s += fmt.Sprintf("  %.1f steps/s", rate)
	}
	if live.Loss != 0 {
		s += fmt.Sprintf("  loss %.4f", live.Loss)
	}
	if !math.IsNaN(meanQ) {
		s += fmt.Sprintf("  mean Q %.4f", meanQ)
	}
	if !math.IsNaN(epsilon) {
		s += fmt.Sprintf("  ε %.3f", epsilon)
	}
	if p.BestEpoch > 0 {
		s += fmt.Sprintf("  valid Sharpe %.3f (best %.3f @%d)", p.LastValidSharpe, p.BestValidSharpe, p.BestEpoch)
	}
	return s
}

func deviceNote(p workflows.Progress) string {
	if p.Device == "" {
		return ""
	}
	return fmt.Sprintf("; %s backend on %s, %s", p.Backend, p.Device, p.Precision)
}
