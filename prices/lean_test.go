package prices

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/files"
)

// TestLeanFactorRowThatApplies: the factors of a bar are those of the
// first factor-file row dated on or after the bar's date, 1 and 1 after
// the last row (QuantConnect/Lean's CorporateFactorProvider.GetPriceFactor
// walks the rows from the newest and stops before a row dated before the
// bar). Lines with "inf" or "e+" and rows of no positive scale are
// skipped, as LEAN skips them; rows are sorted.
func TestLeanFactorRowThatApplies(t *testing.T) {
	raw := "20140806,0.9011818,0.25,94.97\n" +
		"20140507,0.8961764,0.03571430,592.33\n" +
		"20140606,0.9011818,0.03571430,645.57\n" +
		"20140601,inf,1,1\n" +
		"20140602,1,1e+07,1\n" +
		"20140603,0,1,1\n"
	ff, err := ParseFactorFile(context.Background(), "f.csv", strings.NewReader(raw), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ff.Rows) != 3 || ff.Rows[0].Date != 20140507 || ff.Rows[2].Date != 20140806 {
		t.Fatalf("rows %+v, want the three valid ones in date order", ff.Rows)
	}
	cases := []struct {
		date     int
		pf, sf   float64
		describe string
	}{
		{20140101, 0.8961764, 0.0357143, "before the first row: the first row"},
		{20140507, 0.8961764, 0.0357143, "on a row's date: that row"},
		{20140508, 0.9011818, 0.0357143, "the day after: the next row"},
		{20140606, 0.9011818, 0.0357143, "the last day before the 2014-06-09 split"},
		{20140609, 0.9011818, 0.25, "the split's first day"},
		{20140807, 1, 1, "after the last row: unadjusted"},
	}
	var cur factorCursor
	for _, c := range cases {
		for name, r := range map[string]FactorRow{"At": ff.At(c.date), "cursor": cur.at(ff, c.date)} {
			if r.PriceFactor != c.pf || math.Abs(r.SplitFactor-c.sf) > 1e-7 {
				t.Errorf("%s(%d) (%s): %v × %v, want %v × %v", name, c.date, c.describe, r.PriceFactor, r.SplitFactor, c.pf, c.sf)
			}
		}
	}
	if _, err := ParseFactorFile(context.Background(), "f.csv", strings.NewReader("20140507,x,1\n"), Limits{}); err == nil ||
		!strings.Contains(err.Error(), `f.csv:1: column "price_factor"`) {
		t.Errorf("a bad factor: %v", err)
	}
}

// TestLeanEquityIsAdjustedAsLeanAdjustsIt: AAPL's hour bars around the 7:1
// split of 2014-06-09 are each raw price ÷ 10,000 × price_factor ×
// split_factor of the row that applies to the bar's New York date, the
// volume ÷ split_factor, and the times are New York's in UTC; the split,
// a 1/7 jump in the raw closes, is gone after adjustment.
func TestLeanEquityIsAdjustedAsLeanAdjustsIt(t *testing.T) {
	lines := zipLines(t, fixAAPL)
	ctx := context.Background()
	b, err := Source{}.Bars(ctx, fixAAPL)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Origin.Adjusted || b.Origin.Format != FormatLeanEquity || !strings.Contains(b.Origin.Note, "factor_files/aapl.csv") {
		t.Fatalf("origin %+v, want adjusted by factor_files/aapl.csv", b.Origin)
	}
	raw, err := Source{}.UnadjustedLeanBars(ctx, fixAAPL)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Origin.Adjusted {
		t.Errorf("UnadjustedLeanBars says adjusted: %+v", raw.Origin)
	}
	factors := func(day string) (pf, sf float64) {
		switch {
		case day <= "20140507":
			return 0.8961764, 0.03571430
		case day <= "20140606":
			return 0.9011818, 0.03571430
		default:
			return 0.9011818, 0.25
		}
	}
	ny, _ := time.LoadLocation("America/New_York")
	for i, l := range lines {
		f := strings.Split(l, ",")
		local, err := time.ParseInLocation("20060102 15:04", f[0], ny)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Time[i].Equal(local) || b.Time[i].Location() != time.UTC {
			t.Fatalf("bar %d: time %v, want %v in UTC", i, b.Time[i], local.UTC())
		}
		pf, sf := factors(f[0][:8])
		num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
		want := [5]float64{num(1) / 1e4 * pf * sf, num(2) / 1e4 * pf * sf, num(3) / 1e4 * pf * sf, num(4) / 1e4 * pf * sf, num(5) / sf}
		got := [5]float64{b.Open[i], b.High[i], b.Low[i], b.Close[i], b.Volume[i]}
		for k := range want {
			if !relNear(got[k], want[k], 1e-12) {
				t.Fatalf("bar %d (%s): %v, want %v", i, l, got, want)
			}
		}
		if rawWant := num(4) / 1e4; !relNear(raw.Close[i], rawWant, 1e-12) {
			t.Fatalf("raw bar %d: close %v, want %v", i, raw.Close[i], rawWant)
		}
	}
	split := b.Index(utc("2014-06-09 13:00:00")) // 09:00 New York
	if split == b.Len() || !b.Time[split].Equal(utc("2014-06-09 13:00:00")) {
		t.Fatalf("no bar at 2014-06-09 13:00 UTC")
	}
	if r := raw.Close[split] / raw.Close[split-1]; r > 0.16 || r < 0.13 {
		t.Errorf("raw close ratio across the split %v, want about 1/7", r)
	}
	if r := b.Close[split] / b.Close[split-1]; math.Abs(math.Log(r)) > 0.05 {
		t.Errorf("adjusted close ratio across the split %v, want about 1", r)
	}
}

// TestLeanEquityWithoutFactorFileSaysSo: VXX has no factor file: its bars
// load raw, and Origin says they are not adjusted and which file was
// looked for.
func TestLeanEquityWithoutFactorFileSaysSo(t *testing.T) {
	b, err := Source{}.Bars(context.Background(), fixVXX)
	if err != nil {
		t.Fatal(err)
	}
	if b.Origin.Adjusted || !strings.Contains(b.Origin.Note, "not adjusted") || !strings.Contains(b.Origin.Note, filepath.Join("factor_files", "vxx.csv")) {
		t.Errorf("origin %+v, want not adjusted, naming factor_files/vxx.csv", b.Origin)
	}
	first := strings.Split(zipLines(t, fixVXX)[0], ",")
	c, _ := strconv.ParseFloat(first[4], 64)
	if b.Close[0] != c/1e4 {
		t.Errorf("first close %v, want the raw %v", b.Close[0], c/1e4)
	}
}

// TestLeanForexIsMidsAndSpread: OHLC are the mids of bid and ask, Spread
// is ask open − bid open, and there is no volume.
func TestLeanForexIsMidsAndSpread(t *testing.T) {
	b, err := Source{}.Bars(context.Background(), fixEURUSD)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range zipLines(t, fixEURUSD) {
		f := strings.Split(l, ",")
		v := func(k int) float64 { x, _ := strconv.ParseFloat(f[k], 64); return x }
		want := [5]float64{(v(1) + v(6)) / 2, (v(2) + v(7)) / 2, (v(3) + v(8)) / 2, (v(4) + v(9)) / 2, v(6) - v(1)}
		got := [5]float64{b.Open[i], b.High[i], b.Low[i], b.Close[i], b.Spread[i]}
		if got != want {
			t.Fatalf("bar %d (%s): OHLC, spread %v, want %v", i, l, got, want)
		}
	}
	if b.HasVolume {
		t.Errorf("HasVolume, want false (OANDA's sizes are 0)")
	}
}

// TestLeanFactorFileFollowsTheDataRoots: the factor file is read through
// the data roots: a zip allowed by name (a path typed on the command line)
// brings its factor files with it; inside a root, a factor file that is a
// link out of it is refused rather than taken for a missing one.
func TestLeanFactorFileFollowsTheDataRoots(t *testing.T) {
	base := t.TempDir()
	lean, other, outside := filepath.Join(base, "lean"), filepath.Join(base, "other"), filepath.Join(base, "outside")
	for _, d := range []string{lean, other, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	zipPath := filepath.Join(lean, "equity-aapl.zip")
	copyFile(t, fixAAPL, zipPath)
	copyFile(t, "testdata/lean/factor_files/aapl.csv", filepath.Join(lean, "factor_files", "aapl.csv"))
	roots, err := files.NewRoots(other)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src, err := Source{Roots: roots}.Allow(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Bars(ctx, zipPath)
	if err != nil || !b.Origin.Adjusted {
		t.Fatalf("a zip allowed by name: adjusted %v, %v; want adjusted with its factor file", b != nil && b.Origin.Adjusted, err)
	}
	// A root holding the zip, and a factor_files link to a directory outside.
	inRoot := filepath.Join(base, "root")
	copyFile(t, fixAAPL, filepath.Join(inRoot, "equity-aapl.zip"))
	copyFile(t, "testdata/lean/factor_files/aapl.csv", filepath.Join(outside, "aapl.csv"))
	if err := os.Symlink(outside, filepath.Join(inRoot, "factor_files")); err != nil {
		t.Fatal(err)
	}
	_, err = sourceAt(t, inRoot).Bars(ctx, filepath.Join(inRoot, "equity-aapl.zip"))
	if !errors.Is(err, files.ErrOutsideRoot) {
		t.Errorf("a factor file linked from outside the root: %v, want files.ErrOutsideRoot", err)
	}
}

// TestLeanCorpusSplitsVanishAfterAdjustment reads the corpus in place:
// AAPL's raw closes jump at the 2014 (7:1) and 2020 (4:1) splits, far
// beyond 10 robust σ; adjusted, neither date holds a jump.
func TestLeanCorpusSplitsVanishAfterAdjustment(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "data", "corpus", "lean", "equity-aapl.zip")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the corpus is not at %s (CI has it at ../shared/data/corpus): %v", path, err)
	}
	ctx := context.Background()
	src, err := Source{}.Allow(path)
	if err != nil {
		t.Fatal(err)
	}
	adj, err := src.Bars(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := src.UnadjustedLeanBars(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	jumpDays := func(b *Bars) map[string]bool {
		out := map[string]bool{}
		in := Inspect(b, 10)
		for _, j := range in.TopJumps {
			out[j.Time.Format("2006-01-02")] = true
		}
		return out
	}
	rawDays, adjDays := jumpDays(raw), jumpDays(adj)
	for _, d := range []string{"2014-06-09", "2020-08-31"} {
		if !rawDays[d] {
			t.Errorf("raw AAPL: no top jump on the split day %s (top jumps on %v)", d, rawDays)
		}
		if adjDays[d] {
			t.Errorf("adjusted AAPL: a top jump on the split day %s", d)
		}
	}
}

// TestLeanFactorFileIsTheZipsOwn: with two data roots, a relative zip path
// found in the second root is adjusted by the factor file beside it, not
// by the first root's file of the same name.
func TestLeanFactorFileIsTheZipsOwn(t *testing.T) {
	base := t.TempDir()
	first, second := filepath.Join(base, "first"), filepath.Join(base, "second")
	copyFile(t, fixAAPL, filepath.Join(second, "equity-aapl.zip"))
	copyFile(t, "testdata/lean/factor_files/aapl.csv", filepath.Join(second, "factor_files", "aapl.csv"))
	// The first root's factor file would halve every price.
	copyFile(t, "testdata/lean/factor_files/aapl.csv", filepath.Join(first, "factor_files", "unused.csv"))
	if err := os.WriteFile(filepath.Join(first, "factor_files", "aapl.csv"), []byte("20501231,0.5,1,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := files.NewRoots(first, second)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	b, err := Source{Roots: roots}.Bars(context.Background(), "equity-aapl.zip")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Source{}.Bars(context.Background(), filepath.Join(second, "equity-aapl.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if b.Close[0] != want.Close[0] || !b.Origin.Adjusted {
		t.Errorf("first close %v (adjusted %v), want %v: the zip's own factor file", b.Close[0], b.Origin.Adjusted, want.Close[0])
	}
}
