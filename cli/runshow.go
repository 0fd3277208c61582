package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// runRecord is everything the metadata store holds about one run: what
// "run show", "run compare" and "report" print.
type runRecord struct {
	Run         metadata.Run                `json:"run"`
	Epochs      []metadata.Epoch            `json:"epochs"`
	Checkpoints []metadata.CheckpointRecord `json:"checkpoints"`
	Backtests   []metadata.BacktestRecord   `json:"backtests"`
}

// loadRunRecord reads a run's row, epochs, checkpoints and backtests.
func loadRunRecord(ctx context.Context, st store.Reader, id string) (runRecord, error) {
	var r runRecord
	var err error
	if r.Run, err = st.GetRun(ctx, id); err != nil {
		return r, err
	}
	if r.Epochs, err = st.ListEpochs(ctx, id); err != nil {
		return r, err
	}
	if r.Checkpoints, err = st.ListCheckpoints(ctx, id); err != nil {
		return r, err
	}
	if r.Backtests, err = st.ListBacktests(ctx, id); err != nil {
		return r, err
	}
	return r, nil
}

// best returns the checkpoint marked best, or nil.
func (r runRecord) best() *metadata.CheckpointRecord {
	for i := range r.Checkpoints {
		if r.Checkpoints[i].IsBest {
			return &r.Checkpoints[i]
		}
	}
	return nil
}

// stepsPerSecond is an epoch's gradient steps per second of its wall time
// (collect plus train): the global step gained since the previous epoch
// divided by the epoch's duration. Zero when either is unknown.
func stepsPerSecond(epochs []metadata.Epoch, i int) float64 {
	e := epochs[i]
	if e.DurationMS <= 0 {
		return 0
	}
	prev := int64(0)
	if i > 0 && epochs[i-1].Epoch == e.Epoch-1 {
		prev = epochs[i-1].GlobalStep
	} else if i > 0 {
		return 0 // a gap: the previous epoch's step is unknown
	}
	return float64(e.GlobalStep-prev) / (float64(e.DurationMS) / 1000)
}

// runShowCmd is "dqnflow run show RUN [--json]": the config that ran,
// backend, device and precision, a table of epochs, the checkpoints (best
// marked) and the backtests, from the metadata store; and, while the run
// lives, its progress from Temporal.
func runShowCmd(e *env) *cobra.Command {
	cmd := leaf("show RUN",
		"a run: config, device, epochs, checkpoints, backtests",
		"show prints a run's progress while it lives (from Temporal) and what the metadata store holds: the config that ran, backend, device and precision, epochs, checkpoints (best marked) and backtests.",
		"dqnflow run show lr-3e-4",
		"dqnflow run show lr-3e-4 --json | jq '.epochs[-1]'")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print everything as one JSON object")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		id := pos[0]

		// Temporal answers while a worker runs the workflow; the store answers
		// for every run it recorded. Either is enough, both are better.
		var p *workflows.Progress
		var live *activities.Heartbeat
		var queryErr error
		if c, err := dial(ctx, e); err != nil {
			queryErr = err
		} else {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var prog workflows.Progress
			prog, live, queryErr = progress(qctx, c, id)
			cancel()
			c.Close()
			if queryErr == nil {
				p = &prog
			}
		}
		var rec *runRecord
		storeErr := func() error {
			st, err := openReader(ctx, e)
			if err != nil {
				return err
			}
			defer st.Close()
			// A run keyed "<workflow id>.<execution id>" is found by either.
			key := id
			if p != nil && p.RunID != "" {
				key = p.RunID
			}
			r, err := loadRunRecord(ctx, st, key)
			if err != nil {
				return err
			}
			rec = &r
			return nil
		}()
		if p == nil && rec == nil {
			if isNotFound(queryErr) && errors.Is(storeErr, metadata.ErrNotFound) {
				return noSuchRun(e, id)
			}
			return fmt.Errorf("run %s: Temporal: %v; metadata store: %v", id, queryErr, storeErr)
		}
		if *jsonOut {
			out := map[string]any{"run_id": id}
			if p != nil {
				out["progress"], out["training"] = p, live
			} else {
				out["temporal_error"] = queryErr.Error()
			}
			if rec != nil {
				out["run"], out["epochs"], out["checkpoints"], out["backtests"] = rec.Run, rec.Epochs, rec.Checkpoints, rec.Backtests
			} else {
				out["store_error"] = storeErr.Error()
			}
			return printJSON(e, out)
		}
		if p != nil {
			printProgress(e, *p, live)
		} else {
			fmt.Fprintf(e.stderr, "run %s: no live answer from Temporal (%v); showing the metadata store\n", id, queryErr)
		}
		if rec == nil {
			fmt.Fprintf(e.stderr, "run %s: metadata store: %v\n", id, storeErr)
			return nil
		}
		printRunRecord(e.stdout, *rec)
		return nil
	}
	return cmd
}

// printRunRecord prints a run's stored metadata as tables.
func printRunRecord(w io.Writer, r runRecord) {
	run := r.Run
	fmt.Fprintf(w, "run %s [%s]", run.RunID, run.Status)
	if run.WorkflowID != "" && run.WorkflowID != run.RunID {
		fmt.Fprintf(w, ", workflow %s", run.WorkflowID)
	}
	fmt.Fprintf(w, ", lineage %s", run.Lineage)
	if run.ParentRunID != "" {
		fmt.Fprintf(w, ", warm-started from %s", run.ParentRunID)
	}
	fmt.Fprintln(w)
	ran := "not built yet"
	if run.Backend != "" {
		ran = fmt.Sprintf("%s backend on %s, %s", run.Backend, run.Device, run.Precision)
	}
	fmt.Fprintf(w, "ran on: %s\n", ran)
	fmt.Fprintf(w, "created %s", run.CreatedAt.Format(time.RFC3339))
	if run.FinishedAt != nil {
		fmt.Fprintf(w, ", finished %s (%s)", run.FinishedAt.Format(time.RFC3339), run.FinishedAt.Sub(run.CreatedAt).Round(time.Second))
	}
	fmt.Fprintln(w)
	if run.BestValidSharpe != nil && run.BestEpoch != nil {
		fmt.Fprintf(w, "best validation Sharpe %.3f at epoch %d\n", *run.BestValidSharpe, *run.BestEpoch)
	}
	if run.Error != "" {
		fmt.Fprintf(w, "error: %s\n", run.Error)
	}

	fmt.Fprintf(w, "\nepochs (%d):\n", len(r.Epochs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\tstep\tloss\tgrad norm\tmean Q\tε\tmean reward\tvalid Sharpe\tsteps/s\tenv steps\ttime\t")
	for i, ep := range r.Epochs {
		fmt.Fprintf(tw, "%d\t%d\t%.4f\t%.3f\t%s\t%s\t%s\t%s\t%.1f\t%d\t%s\t\n", ep.Epoch, ep.GlobalStep, ep.Loss, ep.GradNorm,
			metric(ep.Metrics, "mean_q", "%.4f"), metric(ep.Metrics, "epsilon", "%.3f"), metric(ep.Metrics, "mean_reward", "%.5f"),
			optional(ep.ValidSharpe, "%.3f"), stepsPerSecond(r.Epochs, i), ep.EnvSteps,
			(time.Duration(ep.DurationMS) * time.Millisecond).String())
	}
	tw.Flush()

	fmt.Fprintf(w, "\ncheckpoints (%d, * = best):\n", len(r.Checkpoints))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tepoch\tstep\tvalid Sharpe\tbytes\tstate\turi")
	for _, c := range r.Checkpoints {
		mark, state := "", "kept"
		if c.IsBest {
			mark = "*"
		}
		if c.Pruned {
			state = "pruned"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\t%s\n", mark, c.Epoch, c.GlobalStep, optional(c.ValidSharpe, "%.3f"), c.Bytes, state, c.URI)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nbacktests (%d):\n", len(r.Backtests))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\tsplit\tSharpe\treturn\tmax DD\ttrades\tB&H Sharpe\tB&H return\trange\t")
	for _, b := range r.Backtests {
		var rep sim.Report
		json.Unmarshal(b.Report, &rep)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f%%\t%.2f%%\t%d\t%.3f\t%.2f%%\t%s .. %s\t\n", b.Epoch, b.Split, optional(b.Sharpe, "%.3f"),
			100*b.TotalReturn, 100*b.MaxDrawdown, rep.Trades, rep.BuyAndHold.Sharpe, 100*rep.BuyAndHold.TotalReturn,
			b.DataFrom.Format("2006-01-02"), b.DataTo.Format("2006-01-02"))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nconfig:")
	var cfg any
	if json.Unmarshal(run.Config, &cfg) == nil {
		b, _ := json.MarshalIndent(cfg, "  ", "  ")
		fmt.Fprintf(w, "  %s\n", b)
	}

}

// deviceID finds the device of a trainer's description: "cpu:N" of a
// stand-in ("cpu:1: cpu (2 threads ...)"), "cuda:N" of a GPU ("NVIDIA H100
// (cuda:0, sm_90, ...)"); blasName the CPU backend's matrix library
// ("..., blas openblas 0.3.21 (...)").
var (
	deviceID = regexp.MustCompile(`^cpu:\d+\b|\bcuda:\d+\b`)
	blasName = regexp.MustCompile(`\bblas (\w+)`)
)

// shortDevice is where a run trained in a few words, "cuda:0 bf16-mixed"
// or "cpu/openblas fp32", for a column; "-" before its trainer was built.
func shortDevice(backend, device, precision string) string {
	if backend == "" {
		return "-"
	}
	id := deviceID.FindString(device)
	if id == "" {
		id = backend
	}
	if m := blasName.FindStringSubmatch(device); m != nil && strings.HasPrefix(id, "cpu") {
		id += "/" + m[1]
	}
	return id + " " + precision
}

// metric formats m[key], or "-" when it is absent.
func metric(m map[string]float64, key, format string) string {
	v, ok := m[key]
	if !ok {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// optional formats *p, or "-" when p is nil.
func optional(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

// runCompareCmd is "dqnflow run compare RUN RUN...": the runs side by
// side, the config keys whose values differ, and each run's best and final
// metrics.
func runCompareCmd(e *env) *cobra.Command {
	cmd := leaf("compare RUN RUN...",
		"runs side by side: best and final metrics, config differences",
		"compare prints runs side by side: status, device, best and final metrics, and the config keys whose values differ.",
		"dqnflow run compare lr-3e-4 lr-1e-3",
		"dqnflow run compare A B C --json")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	cmd.Args = argsBetween(2, 64)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		st, err := openReader(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		var recs []runRecord
		for _, id := range pos {
			r, err := loadRunRecord(ctx, st, id)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		cmp := compareRuns(recs)
		if *jsonOut {
			return printJSON(e, cmp)
		}
		printComparison(e.stdout, cmp)
		return nil
	}
	return cmd
}

// comparison is "run compare"'s result.
type comparison struct {
	Runs []runSummary `json:"runs"`
	// ConfigDiff maps each config key (dotted path) whose value differs
	// between the runs to the value of each run, in the order of Runs
	// (null where a run's config lacks the key).
	ConfigDiff map[string][]any `json:"config_diff"`
	DiffKeys   []string         `json:"-"`
}

// runSummary is one run's best and final results.
type runSummary struct {
	RunID           string          `json:"run_id"`
	Status          metadata.Status `json:"status"`
	Backend         string          `json:"backend"`
	Device          string          `json:"device"`
	Precision       string          `json:"precision"`
	Epochs          int             `json:"epochs"`
	BestEpoch       *int            `json:"best_epoch,omitempty"`
	BestValidSharpe *float64        `json:"best_valid_sharpe,omitempty"`
	FinalLoss       *float64        `json:"final_loss,omitempty"`
	FinalGradNorm   *float64        `json:"final_grad_norm,omitempty"`
	FinalEpsilon    *float64        `json:"final_epsilon,omitempty"`
	FinalMeanQ      *float64        `json:"final_mean_q,omitempty"`
	FinalSharpe     *float64        `json:"final_valid_sharpe,omitempty"`
	// BestReturn and BestMaxDrawdown are the "valid" backtest of the best
	// epoch; BuyAndHoldSharpe is buy-and-hold on the same range.
	BestReturn       *float64 `json:"best_valid_return,omitempty"`
	BestMaxDrawdown  *float64 `json:"best_valid_max_drawdown,omitempty"`
	BuyAndHoldSharpe *float64 `json:"buy_and_hold_sharpe,omitempty"`
	StepsPerSecond   float64  `json:"steps_per_second"` // mean over the epochs
	WallSeconds      float64  `json:"wall_seconds"`     // sum of the epochs' durations
}

func summarise(r runRecord) runSummary {
	s := runSummary{RunID: r.Run.RunID, Status: r.Run.Status, Backend: r.Run.Backend, Device: r.Run.Device,
		Precision: r.Run.Precision, Epochs: r.Run.EpochsDone, BestEpoch: r.Run.BestEpoch, BestValidSharpe: r.Run.BestValidSharpe}
	if n := len(r.Epochs); n > 0 {
		last := r.Epochs[n-1]
		s.FinalLoss, s.FinalGradNorm, s.FinalSharpe = &last.Loss, &last.GradNorm, last.ValidSharpe
		if v, ok := last.Metrics["epsilon"]; ok {
			s.FinalEpsilon = &v
		}
		if v, ok := last.Metrics["mean_q"]; ok {
			s.FinalMeanQ = &v
		}
		var steps, ms int64
		for _, ep := range r.Epochs {
			ms += ep.DurationMS
		}
		steps = last.GlobalStep
		s.WallSeconds = float64(ms) / 1000
		if ms > 0 {
			s.StepsPerSecond = float64(steps) / s.WallSeconds
		}
	}
	for _, b := range r.Backtests {
		if b.Split != metadata.SplitValid || r.Run.BestEpoch == nil || b.Epoch != *r.Run.BestEpoch {
			continue
		}
		ret, dd := b.TotalReturn, b.MaxDrawdown
		s.BestReturn, s.BestMaxDrawdown = &ret, &dd
		var rep sim.Report
		if json.Unmarshal(b.Report, &rep) == nil {
			bh := rep.BuyAndHold.Sharpe
			s.BuyAndHoldSharpe = &bh
		}
	}
	return s
}

func compareRuns(recs []runRecord) comparison {
	c := comparison{ConfigDiff: map[string][]any{}}
	flat := make([]map[string]any, len(recs))
	keys := map[string]bool{}
	for i, r := range recs {
		c.Runs = append(c.Runs, summarise(r))
		var cfg any
		json.Unmarshal(r.Run.Config, &cfg)
		flat[i] = map[string]any{}
		flatten("", cfg, flat[i])
		for k := range flat[i] {
			keys[k] = true
		}
	}
	for k := range keys {
		vals := make([]any, len(recs))
		differ := false
		for i := range recs {
			vals[i] = flat[i][k]
			if i > 0 && !jsonEqual(vals[i], vals[0]) {
				differ = true
			}
		}
		if differ {
			c.ConfigDiff[k] = vals
			c.DiffKeys = append(c.DiffKeys, k)
		}
	}
	sort.Strings(c.DiffKeys)
	return c
}

// flatten writes every leaf of a decoded JSON value into out under its
// dotted path ("optim.lr"); arrays are leaves.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = v
		return
	}
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, sub, out)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func printComparison(w io.Writer, c comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, f func(s runSummary) string) {
		fmt.Fprint(tw, name)
		for _, s := range c.Runs {
			fmt.Fprintf(tw, "\t%s", f(s))
		}
		fmt.Fprintln(tw)
	}
	opt := func(p *float64, format string) string { return optional(p, format) }
	pct := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f%%", 100**p)
	}
	row("run", func(s runSummary) string { return s.RunID })
	row("status", func(s runSummary) string { return string(s.Status) })
	row("ran on", func(s runSummary) string { return shortDevice(s.Backend, s.Device, s.Precision) })
	row("epochs", func(s runSummary) string { return fmt.Sprint(s.Epochs) })
	row("best valid Sharpe", func(s runSummary) string { return opt(s.BestValidSharpe, "%.3f") })
	row("best epoch", func(s runSummary) string {
		if s.BestEpoch == nil {
			return "-"
		}
		return fmt.Sprint(*s.BestEpoch)
	})
	row("best valid return", func(s runSummary) string { return pct(s.BestReturn) })
	row("best valid max DD", func(s runSummary) string { return pct(s.BestMaxDrawdown) })
	row("buy & hold Sharpe", func(s runSummary) string { return opt(s.BuyAndHoldSharpe, "%.3f") })
	row("final loss", func(s runSummary) string { return opt(s.FinalLoss, "%.4f") })
	row("final grad norm", func(s runSummary) string { return opt(s.FinalGradNorm, "%.3f") })
	row("final mean Q", func(s runSummary) string { return opt(s.FinalMeanQ, "%.4f") })
	row("final ε", func(s runSummary) string { return opt(s.FinalEpsilon, "%.3f") })
	row("final valid Sharpe", func(s runSummary) string { return opt(s.FinalSharpe, "%.3f") })
	row("steps/s", func(s runSummary) string { return fmt.Sprintf("%.1f", s.StepsPerSecond) })
	row("training time", func(s runSummary) string {
		return (time.Duration(s.WallSeconds * float64(time.Second))).Round(100 * time.Millisecond).String()
	})
	tw.Flush()
	// The devices in full, one a line: a column of them would be some
	// 200 characters wide.
	fmt.Fprintln(w, "\nran on, in full:")
	for _, s := range c.Runs {
		full := "-"
		if s.Backend != "" {
			full = fmt.Sprintf("%s backend on %s, %s", s.Backend, s.Device, s.Precision)
		}
		fmt.Fprintf(w, "  %s: %s\n", s.RunID, full)
	}
	if len(c.DiffKeys) == 0 {
		fmt.Fprintln(w, "\nconfig: identical")
		return
	}
	fmt.Fprintf(w, "\nconfig differences (%d):\n", len(c.DiffKeys))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range c.DiffKeys {
		fmt.Fprint(tw, k)
		for _, v := range c.ConfigDiff[k] {
			b, _ := json.Marshal(v)
			fmt.Fprintf(tw, "\t%s", strings.TrimSpace(string(b)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
