package walkforward

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/dqnflow/dqnflow/metadata"
)

// StudyRecord is the store's rows (metadata.WalkForwardStudy) of a
// study's output: its header's Go values as results.json encodes them,
// its windows and its results. The activities write them, and "dqnflow
// walkforward" records a results.json with them.
func StudyRecord(id string, out Output) (metadata.WalkForwardStudy, error) {
	rec := metadata.WalkForwardStudy{ID: id, Seeds: out.Seeds, LeaveOut: out.LeaveOut, Gate: out.Gate, Panel: out.Panel,
		TrialsStudy: out.Trials.Study, TrialsPrior: out.Trials.Prior, TrialsTotal: out.Trials.Total,
		Device: out.Device, Seconds: out.Seconds, Notes: out.Notes, Stopped: out.Stopped}
	for _, f := range []struct {
		name string
		v    any
		dst  *json.RawMessage
	}{{"config", out.Config, &rec.Config}, {"series", out.Series, &rec.Series}, {"layout", out.Layout, &rec.Layout},
		{"plan", out.Plan, &rec.Plan}, {"timings", out.Timings, &rec.Timings}} {
		b, err := json.Marshal(f.v)
		if err != nil {
			return rec, fmt.Errorf("encode the study's %s: %w", f.name, err)
		}
		if string(b) == "null" { // a nil slice: none
			b = []byte("[]")
		}
		*f.dst = b
	}
	for _, w := range out.Windows {
		rec.Windows = append(rec.Windows, metadata.WalkForwardWindow{Index: w.Index, TrainFrom: w.TrainFrom, ValidFrom: w.ValidFrom,
			TestFrom: w.TestFrom, TestTo: w.TestTo})
	}
	// A results.json of hand or of an older dqnflow may list no windows;
	// the results' own window numbers stand for them then, with no dates.
	if len(rec.Windows) == 0 {
		seen := map[int]bool{}
		for _, r := range out.Results {
			if !seen[r.Window] {
				seen[r.Window] = true
				rec.Windows = append(rec.Windows, metadata.WalkForwardWindow{Index: r.Window})
			}
		}
	}
	for _, r := range out.Results {
		rec.Results = append(rec.Results, metadata.WalkForwardResult{Window: r.Window, Series: r.Series, Strategy: r.Strategy, Seed: r.Seed,
			Detail: r.Detail, Note: r.Note, InTraining: r.InTraining, ValidSharpe: r.ValidSharpe, ValidT: r.ValidT, Bars: r.Bars,
			Sharpe: r.Sharpe, SharpeLo: r.SharpeLo, SharpeHi: r.SharpeHi, SharpeT: r.SharpeT, BarSharpe: r.BarSharpe,
			DaysPerYear: r.DaysPerYear, TotalReturn: r.TotalReturn, MaxDrawdown: r.MaxDrawdown, Turnover: r.Turnover, Costs: r.Costs,
			Days: r.Days, Returns: r.Returns})
	}
	return rec, nil
}

// StudyDiff names the fields in which studies a and b, as
// StudyRecord gives them, differ as studies: config, series,
// layout, seeds, leave_out, gate, panel and prior_trials (JSON compared
// as values, a missing list as an empty one). Their results, windows,
// timings and notes are not compared: they are what a study produces.
func StudyDiff(a, b metadata.WalkForwardStudy) []string {
	var d []string
	for _, f := range []struct {
		name string
		a, b json.RawMessage
	}{{"config", a.Config, b.Config}, {"series", a.Series, b.Series}, {"layout", a.Layout, b.Layout}} {
		if !sameJSON(f.a, f.b) {
			d = append(d, f.name)
		}
	}
	if !slices.Equal(a.Seeds, b.Seeds) {
		d = append(d, "seeds")
	}
	if !slices.Equal(a.LeaveOut, b.LeaveOut) {
		d = append(d, "leave_out")
	}
	if a.Gate != b.Gate {
		d = append(d, "gate")
	}
	if a.Panel != b.Panel {
		d = append(d, "panel")
	}
	if a.TrialsPrior != b.TrialsPrior {
		d = append(d, "prior_trials")
	}
	return d
}

// sameJSON reports whether a and b encode the same value.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// StudyOutput is the study that the store's rows rec hold, the inverse
// of StudyRecord: empty lists read as none (nil), as a
// results.json's do, and windows that StudyRecord made up from the
// results (no dates) are left out.
func StudyOutput(rec metadata.WalkForwardStudy) (Output, error) {
	out := Output{Gate: rec.Gate, Panel: rec.Panel, Device: rec.Device, Seconds: rec.Seconds, Stopped: rec.Stopped,
		Trials: Trials{Study: rec.TrialsStudy, Prior: rec.TrialsPrior, Total: rec.TrialsTotal}}
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
			continue // a window StudyRecord made up from the results
		}
		out.Windows = append(out.Windows, Window{Index: w.Index, TrainFrom: w.TrainFrom, ValidFrom: w.ValidFrom,
			TestFrom: w.TestFrom, TestTo: w.TestTo})
	}
	for _, r := range rec.Results {
		out.Results = append(out.Results, Result{Window: r.Window, Series: r.Series, Strategy: r.Strategy, Seed: r.Seed,
			Detail: r.Detail, Note: r.Note, InTraining: r.InTraining, ValidSharpe: r.ValidSharpe, ValidT: r.ValidT, Bars: r.Bars,
			Sharpe: r.Sharpe, SharpeLo: r.SharpeLo, SharpeHi: r.SharpeHi, SharpeT: r.SharpeT, BarSharpe: r.BarSharpe,
			DaysPerYear: r.DaysPerYear, TotalReturn: r.TotalReturn, MaxDrawdown: r.MaxDrawdown, Turnover: r.Turnover, Costs: r.Costs,
			Days: r.Days, Returns: r.Returns})
	}
	return out, nil
}
