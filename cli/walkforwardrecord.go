package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/walkforward"
)

// walkForwardRecordCmd is "dqnflow walkforward record DIR_OR_FILE [--id
// ID]": a results.json written to the metadata store's walk-forward
// tables, for "dqnflow report --walkforward ID" on any host that sees the
// store.
func walkForwardRecordCmd(e *env) *cobra.Command {
	cmd := leaf("record DIR_OR_FILE",
		"write a walk-forward's results.json to the metadata store",
		"record reads a walk-forward's results.json (DIR/results.json, or the file named) and writes the whole study to the metadata store "+
			"(PostgreSQL: the SQLite store of \"dqnflow dev\" keeps no studies) in one transaction: its config, series, layout and seeds, "+
			"every window, and every result with its daily returns. The study's id is --id, or the name of the directory results.json is in; "+
			"recording an id again replaces that study. \"dqnflow report --walkforward ID\" draws it.",
		"dqnflow walkforward record runs/wf",
		"dqnflow walkforward record runs/wf/results.json --id wf-h4-forex-2026-12")
	fs := cmd.Flags()
	id := fs.String("id", "", "the study's id in the store (default: the name of the directory results.json is in)")
	maxBytes := fs.Int64("max-bytes", defaultMaxResultsBytes, "largest results.json read, in bytes")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		path := resultsPath(args[0])
		res, err := readStudyJSON(path, *maxBytes)
		if err != nil {
			return err
		}
		studyID := *id
		if studyID == "" {
			studyID = defaultStudyID(path)
		}
		rec, err := activities.WalkForwardRecord(studyID, res)
		if err != nil {
			return fmt.Errorf("record %s: %w", path, err)
		}
		st, err := openStore(ctx, e, false)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := recordStudy(ctx, st, rec); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "recorded walk-forward study %s: %d windows, %d results (dqnflow report --walkforward %s --out DIR draws it)\n",
			studyID, len(rec.Windows), len(rec.Results), studyID)
		return nil
	}
	return cmd
}

// resultsPath is arg, or arg/results.json when arg is a directory.
func resultsPath(arg string) string {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		return filepath.Join(arg, "results.json")
	}
	return arg
}

// defaultStudyID is the name of the directory that holds results.json
// (runs/<id> is `dqnflow walkforward`'s default --out).
func defaultStudyID(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Base(filepath.Dir(path))
	}
	return filepath.Base(filepath.Dir(abs))
}

// recordStudy writes rec to st, which must keep walk-forward studies.
func recordStudy(ctx context.Context, st store.Metadata, rec metadata.WalkForwardStudy) error {
	wf, ok := st.(store.WalkForwardStore)
	if !ok {
		return fmt.Errorf("record walk-forward %s: the metadata store %T keeps no walk-forward studies", rec.ID, st)
	}
	return wf.RecordWalkForward(ctx, rec)
}

// studyOutput is the study that the store's rows rec hold, as
// readStudyJSON would read its results.json; empty lists read as none
// (nil), as results.json's do.
func studyOutput(rec metadata.WalkForwardStudy) (walkforward.Output, error) {
	out := walkforward.Output{Gate: rec.Gate, Panel: rec.Panel, Device: rec.Device, Seconds: rec.Seconds, Stopped: rec.Stopped,
		Trials: walkforward.Trials{Study: rec.TrialsStudy, Prior: rec.TrialsPrior, Total: rec.TrialsTotal}}
	if len(rec.Seeds) > 0 {
		out.Seeds = rec.Seeds
	}
	if len(rec.LeaveOut) > 0 {
		out.LeaveOut = rec.LeaveOut
	}
	if len(rec.Notes) > 0 {
		out.Notes = rec.Notes
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  any
	}{{"config", rec.Config, &out.Config}, {"series", rec.Series, &out.Series}, {"layout", rec.Layout, &out.Layout},
		{"plan", rec.Plan, &out.Plan}, {"timings", rec.Timings, &out.Timings}} {
		if len(f.raw) == 0 || string(f.raw) == "[]" {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return out, fmt.Errorf("walk-forward study %s: its stored %s: %w", rec.ID, f.name, err)
		}
	}
	for _, w := range rec.Windows {
		if w.TrainFrom.IsZero() && w.TestTo.IsZero() {
			continue // a window activities.WalkForwardRecord made up from the results
		}
		out.Windows = append(out.Windows, walkforward.Window{Index: w.Index, TrainFrom: w.TrainFrom, ValidFrom: w.ValidFrom,
			TestFrom: w.TestFrom, TestTo: w.TestTo})
	}
	for _, r := range rec.Results {
		out.Results = append(out.Results, walkforward.Result{Window: r.Window, Series: r.Series, Strategy: r.Strategy, Seed: r.Seed,
			Detail: r.Detail, Note: r.Note, InTraining: r.InTraining, ValidSharpe: r.ValidSharpe, ValidT: r.ValidT, Bars: r.Bars,
			Sharpe: r.Sharpe, SharpeLo: r.SharpeLo, SharpeHi: r.SharpeHi, SharpeT: r.SharpeT, BarSharpe: r.BarSharpe,
			DaysPerYear: r.DaysPerYear, TotalReturn: r.TotalReturn, MaxDrawdown: r.MaxDrawdown, Turnover: r.Turnover, Costs: r.Costs,
			Days: r.Days, Returns: r.Returns})
	}
	if len(out.Results) == 0 {
		return out, fmt.Errorf("walk-forward study %s: no results stored", rec.ID)
	}
	return out, nil
}
