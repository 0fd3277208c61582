package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// inspectResult is what "dqnflow data inspect --json" prints for one
// file (an array of them).
type inspectResult struct {
	Path string `json:"path"`
	// Format, Adjusted and Note are the file's prices.Origin; absent when
	// it did not load.
	Format   prices.Format `json:"format,omitempty"`
	Adjusted bool          `json:"adjusted"`
	Note     string        `json:"note,omitempty"`
	// Inspection is nil when the file did not load.
	*prices.Inspection
	// Unadjusted is, for a LEAN equity adjusted by its factor file, the
	// jumps of the raw prices: the splits the adjustment removed.
	Unadjusted *unadjustedJumps `json:"unadjusted,omitempty"`
	// Usable is whether the file loads within the limits and the config
	// (--config, else the defaults) prepares a dataset of it; Problem says
	// why not.
	Usable  bool   `json:"usable"`
	Problem string `json:"problem,omitempty"`
	// Skipped says why a path was not inspected: a directory (a shell
	// glob over the corpus's lean/* names lean/factor_files, which the
	// equity zips read). A skipped path is not counted as unusable.
	Skipped string `json:"skipped,omitempty"`
	// Ranges are the bars of the config's training, validation and test
	// ranges, when it prepares.
	Ranges *inspectRanges `json:"ranges,omitempty"`
}

type unadjustedJumps struct {
	Jumps    int           `json:"jumps"`
	TopJumps []prices.Jump `json:"top_jumps,omitempty"`
}

type inspectRanges struct {
	Train int `json:"train"`
	Valid int `json:"valid"`
	Test  int `json:"test"`
}

// dataCmd is "dqnflow data": what a price file holds.
func dataCmd(e *env) *cobra.Command {
	return group("data", "price files: what they hold, whether a run can use them",
		"data inspects price files before a run trusts them.", dataInspectCmd(e))
}

// dataInspectCmd is "dqnflow data inspect".
func dataInspectCmd(e *env) *cobra.Command {
	cmd := leaf("inspect PATH...",
		"what each price file holds: format, bars, bar size, gaps, jumps, spread, usable or not",
		"inspect reads each price file as a run would (the format found from its content: tab- or comma-separated text with or without a header, a LEAN equity or forex zip, Parquet) and reports the format, the bars and their first and last times, the bar size (median spacing), the gaps (spacings at least two bars longer than usual for their weekday and hour, so that a market's nightly and weekend closures are none), the longest gap, suspected splits or bad ticks (close-to-close log returns beyond --jump-sigma robust standard deviations, σ = 1.4826 × MAD), the spread in basis points where the file has bid and ask, whether a LEAN equity was adjusted for splits and dividends, and whether the file is usable: it loads within the data limits and the config (--config, else the defaults) prepares a dataset of it. It exits 1 when any file is unusable; a directory is skipped. Paths typed here are read wherever they are, with the LEAN factor files beside them.",
		"dqnflow data inspect ../shared/data/corpus/hourly/*.csv",
		"dqnflow data inspect --json prices.parquet lean/equity-aapl.zip")
	cmd.Args = argsBetween(1, math.MaxInt)
	fs := cmd.Flags()
	jsonOut := fs.Bool("json", false, "print a JSON array, one object per file")
	jumpSigma := fs.Float64("jump-sigma", 10, "a jump is a close-to-close log return farther than this many robust standard deviations from the median")
	cfgPath := fs.String("config", "", "the run config a file must suit (default: the defaults)")
	df := addDataFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !(*jumpSigma > 0) {
			return fmt.Errorf("%w: flag --jump-sigma %v: want a positive number", errUsage, *jumpSigma)
		}
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return fmt.Errorf("%w: flag --config: %v", errUsage, err)
		}
		src, err := df.source(args...)
		if err != nil {
			return err
		}
		var results []inspectResult
		bad := 0
		for _, p := range args {
			r := inspectFile(cmd.Context(), src, cfg, p, *jumpSigma)
			if !r.Usable && r.Skipped == "" {
				bad++
			}
			results = append(results, r)
		}
		if *jsonOut {
			if err := printJSON(e, results); err != nil {
				return err
			}
		} else {
			for _, r := range results {
				printInspection(e, r)
			}
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d paths unusable", bad, len(results))
		}
		return nil
	}
	return cmd
}

// inspectFile loads and inspects one file.
func inspectFile(ctx context.Context, src prices.Source, cfg config.RunConfig, path string, jumpSigma float64) inspectResult {
	r := inspectResult{Path: path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		r.Skipped = "a directory, not a price file (name the files in it; LEAN's factor_files are read by their equity zips)"
		return r
	}
	b, err := src.Bars(ctx, path)
	if err != nil {
		r.Problem = err.Error()
		return r
	}
	r.Format, r.Adjusted, r.Note = b.Origin.Format, b.Origin.Adjusted, b.Origin.Note
	in := prices.Inspect(b, jumpSigma)
	r.Inspection = &in
	if b.Origin.Format == prices.FormatLeanEquity && b.Origin.Adjusted {
		if raw, err := src.UnadjustedLeanBars(ctx, path); err == nil {
			ri := prices.Inspect(raw, jumpSigma)
			r.Unadjusted = &unadjustedJumps{Jumps: ri.Jumps, TopJumps: ri.TopJumps}
		}
	}
	cfg.Data.Path = path
	ds, err := market.Prepare(ctx, src, cfg)
	if err != nil {
		r.Problem = "the config does not prepare it: " + err.Error()
		var fe *config.FieldError
		if errors.As(err, &fe) {
			r.Problem = "the config does not suit it: " + err.Error()
		}
		return r
	}
	r.Usable = true
	r.Ranges = &inspectRanges{Train: ds.Train.Len(), Valid: ds.Valid.Len(), Test: ds.Test.Len()}
	return r
}

// printInspection writes r as text.
func printInspection(e *env, r inspectResult) {
	w := e.stdout
	if r.Skipped != "" {
		fmt.Fprintf(w, "%s: skipped: %s\n\n", r.Path, r.Skipped)
		return
	}
	verdict := "usable"
	if !r.Usable {
		verdict = "UNUSABLE"
	}
	fmt.Fprintf(w, "%s: %s\n", r.Path, verdict)
	in := r.Inspection
	if in == nil {
		fmt.Fprintf(w, "  problem     %s\n\n", r.Problem)
		return
	}
	format := string(r.Format)
	if r.Note != "" {
		format += " (" + r.Note + ")"
	}
	fmt.Fprintf(w, "  format      %s\n", format)
	fmt.Fprintf(w, "  bars        %d, %s to %s\n", in.Bars, stamp(in.First), stamp(in.Last))
	fmt.Fprintf(w, "  bar size    %s (median spacing)\n", in.BarSize)
	if in.Longest != nil {
		g := in.Longest
		fmt.Fprintf(w, "  gaps        %d; longest %s, %s to %s (usual %s)\n", in.Gaps, days(time.Duration(g.Length)), stamp(g.From), stamp(g.To), g.Usual)
	} else {
		fmt.Fprintf(w, "  gaps        none\n")
	}
	fmt.Fprintf(w, "  jumps       %s\n", describeJumps(in.Jumps, in.TopJumps, in.JumpSigma, in.ReturnSigma))
	if u := r.Unadjusted; u != nil {
		fmt.Fprintf(w, "  unadjusted  %s\n", describeJumps(u.Jumps, u.TopJumps, in.JumpSigma, math.NaN()))
	}
	if s := in.Spread; s != nil {
		fmt.Fprintf(w, "  spread      median %.2f bps, p95 %.2f bps, %.2f%% of bars ≤ 0\n", s.MedianBps, s.P95Bps, 100*s.NonPositive)
	}
	if r.Usable {
		fmt.Fprintf(w, "  usable      yes: train %d, validation %d, test %d bars with the config\n\n", r.Ranges.Train, r.Ranges.Valid, r.Ranges.Test)
	} else {
		fmt.Fprintf(w, "  usable      no: %s\n\n", r.Problem)
	}
}

// describeJumps says how many jumps there are and shows the largest
// (sigma, the robust σ, when known).
func describeJumps(n int, top []prices.Jump, jumpSigma, sigma float64) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d beyond %gσ", n, jumpSigma)
	if !math.IsNaN(sigma) {
		fmt.Fprintf(&sb, " (σ of log returns %.4g)", sigma)
	}
	for i, j := range top {
		if i == 5 {
			sb.WriteString(", …")
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&sb, "%s%s ×%.4g (%.0fσ)", sep, stamp(j.Time), j.Ratio, j.Sigmas)
	}
	return sb.String()
}

// stamp is t as inspect shows it.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

// days is d in days and hours when it is a day or more.
func days(d time.Duration) string {
	if d < 24*time.Hour {
		return d.String()
	}
	dd := int(d / (24 * time.Hour))
	h := (d - time.Duration(dd)*24*time.Hour).Hours()
	return fmt.Sprintf("%dd %gh", dd, h)
}
