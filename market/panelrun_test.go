package market_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// TestPanelValidationIsTheEqualRiskPortfolio: two series on the same days,
// one that gains 1 % a day and one that loses 0.5 % and gains 1.5 % in
// turn, give the portfolio's daily returns by hand; its Sharpe ratio is
// theirs annualised with the days a year of the bars.
func TestPanelValidationIsTheEqualRiskPortfolio(t *testing.T) {
	const n = 6
	mk := func(name string) *market.Dataset {
		b := &prices.Bars{Name: name, Time: make([]time.Time, n), Close: make([]float64, n)}
		for i := range n {
			b.Time[i] = time.Date(2020, 1, 1+i, 12, 0, 0, 0, time.UTC)
		}
		return &market.Dataset{Bars: b, Valid: market.Range{From: 0, To: n}, BarsPerYear: 365}
	}
	a, b := mk("a"), mk("b")
	equity := map[*market.Dataset][]float64{a: {100}, b: {100}}
	for i := 1; i < n; i++ {
		equity[a] = append(equity[a], equity[a][i-1]*1.01)
		r := 1.015
		if i%2 == 1 {
			r = 0.995
		}
		equity[b] = append(equity[b], equity[b][i-1]*r)
	}
	sc, err := market.PanelValidation(func(d *market.Dataset, r market.Range) (market.Report, error) {
		return market.Report{Equity: equity[d]}, nil
	}, []string{"a", "b"}, []*market.Dataset{a, b})
	if err != nil {
		t.Fatal(err)
	}
	// Day 0 returns 0 in both; days 1..5: (1 % + (−0.5 % or 1.5 %))/2.
	port := []float64{0, 0.0025, 0.0125, 0.0025, 0.0125, 0.0025}
	var m, v float64
	for _, x := range port {
		m += x / n
	}
	for _, x := range port {
		v += (x - m) * (x - m) / (n - 1)
	}
	want := m / math.Sqrt(v) * math.Sqrt(365)
	if math.Abs(sc.Sharpe-want) > 1e-6*want {
		t.Fatalf("portfolio Sharpe %g, by hand %g", sc.Sharpe, want)
	}
	// As one report: the same Sharpe, its t-statistic SR·√n of the daily
	// returns, the portfolio's compounded return, flat's nothing.
	rep := sc.Report()
	total := 1.0
	for _, x := range port {
		total *= 1 + x
	}
	wantT := m / math.Sqrt(v) * math.Sqrt(n)
	if rep.Sharpe != sc.Sharpe || math.Abs(rep.SharpeT()-wantT) > 1e-9*wantT || math.Abs(sc.T-wantT) > 1e-9*wantT ||
		math.Abs(rep.TotalReturn-(total-1)) > 1e-12 || rep.Flat.TotalReturn != 0 || rep.BuyAndHold.TotalReturn != 0 {
		t.Errorf("report Sharpe %g t %g (score t %g) return %g flat %g buy and hold %g; want %g, t %g, return %g, 0, 0 (no buy-and-hold curve)",
			rep.Sharpe, rep.SharpeT(), sc.T, rep.TotalReturn, rep.Flat.TotalReturn, rep.BuyAndHold.TotalReturn, sc.Sharpe, wantT, total-1)
	}
}

// TestPreparedPanelIsCheckedAgainstItsRecord: a panel of two H4 forex
// slices prepared from data.series records each file's SHA-256 (the
// bytes' own, computed here) and ranges; the same files prepared again
// match the record, and a copy whose one bar has another volume does not, the error
// (ErrPanelChanged) naming that file and only it.
func TestPreparedPanelIsCheckedAgainstItsRecord(t *testing.T) {
	root := t.TempDir()
	var paths []string
	for _, n := range []string{"EURUSD_H4.csv", "USDJPY_H4.csv"} {
		raw, err := os.ReadFile(filepath.Join("..", "walkforward", "testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, n)
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	roots, err := files.NewRoots(root)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.Series = "", strings.Join(paths, ",")
	cfg.Env.EpisodeBars = 64
	ctx := context.Background()
	pn, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := pn.Meta()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := market.ParsePanelMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range paths {
		raw, _ := os.ReadFile(p)
		sum := sha256.Sum256(raw)
		if recs[k].SHA256 != hex.EncodeToString(sum[:]) || recs[k].Path != p || recs[k].TrainBars != pn.Parts[k].Train.Len() || recs[k].TestBars != pn.Parts[k].Test.Len() {
			t.Errorf("record %d: %+v; want %s with sha256 %x", k, recs[k], p, sum)
		}
	}
	again, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := market.CheckPanel(recs, again); err != nil {
		t.Fatalf("the same files: %v", err)
	}
	raw, _ := os.ReadFile(paths[1])
	lines := strings.Split(string(raw), "\n")
	f := strings.Split(lines[100], "\t")
	f[len(f)-1] += "1" // the bar's volume: no price moves, the bytes do
	lines[100] = strings.Join(f, "\t")
	changed := []byte(strings.Join(lines, "\n"))
	if err := os.WriteFile(paths[1], changed, 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := market.PreparePanel(ctx, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = market.CheckPanel(recs, after)
	if !errors.Is(err, market.ErrPanelChanged) || !strings.Contains(err.Error(), "file "+paths[1]+" has SHA-256") || strings.Contains(err.Error(), paths[0]) {
		t.Errorf("the volume of one bar of %s changed: %v; want ErrPanelChanged naming that file alone", paths[1], err)
	}
}
