// Package datainspect says what price files hold before a run reads
// them: each file's format, bars, gaps, jumps (and, for a LEAN equity
// adjusted by its factor file, the splits the adjustment removed), and
// whether a config prepares a dataset of it, with the bars of its
// training, validation and test ranges.
package datainspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// Result is what "dqnflow data inspect --json" prints for one
// file (an array of them).
type Result struct {
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
	Unadjusted *UnadjustedJumps `json:"unadjusted,omitempty"`
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
	Ranges *Ranges `json:"ranges,omitempty"`
}

// UnadjustedJumps are the jumps of a file's raw prices.
type UnadjustedJumps struct {
	Jumps    int           `json:"jumps"`
	TopJumps []prices.Jump `json:"top_jumps,omitempty"`
}

// Ranges are the bars of a config's ranges.
type Ranges struct {
	Train int `json:"train"`
	Valid int `json:"valid"`
	Test  int `json:"test"`
}

// File loads and inspects one file.
func File(ctx context.Context, src prices.Source, cfg config.RunConfig, path string, jumpSigma float64) Result {
	r := Result{Path: path}
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
			r.Unadjusted = &UnadjustedJumps{Jumps: ri.Jumps, TopJumps: ri.TopJumps}
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
	r.Ranges = &Ranges{Train: ds.Train.Len(), Valid: ds.Valid.Len(), Test: ds.Test.Len()}
	return r
}

// Print writes r as text.
func Print(w io.Writer, r Result) {
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
