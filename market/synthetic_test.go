package market

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/prices"
)

func TestSyntheticIsDeterministic(t *testing.T) {
	a, _, err := Synthetic(3000, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := Synthetic(3000, 7)
	if !reflect.DeepEqual(a, b) {
		t.Error("two series from seed 7 differ")
	}
	c, _, _ := Synthetic(3000, 8)
	if reflect.DeepEqual(a.Close, c.Close) {
		t.Error("seeds 7 and 8 give the same closes")
	}
	if _, _, err := Synthetic(1, 7); err == nil {
		t.Error("Synthetic(1) did not fail")
	}
}

// TestSyntheticBarsAreConsistent checks the OHLC invariants, the gapless
// hourly clock and open = previous close, and that the CSV loader, which
// validates every bar, reads a written copy back exactly.
func TestSyntheticBarsAreConsistent(t *testing.T) {
	b, _, err := Synthetic(5000, 3)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("time,open,high,low,close,volume\n")
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < b.Len(); i++ {
		o, h, l, c := b.Open[i], b.High[i], b.Low[i], b.Close[i]
		if !(l > 0 && l <= min(o, c) && h >= max(o, c) && b.Volume[i] > 0) {
			t.Fatalf("bar %d: O %v H %v L %v C %v V %v breaks OHLC(V) invariants", i, o, h, l, c, b.Volume[i])
		}
		if i > 0 && o != b.Close[i-1] {
			t.Fatalf("bar %d: open %v != previous close %v", i, o, b.Close[i-1])
		}
		if want := start.Add(time.Duration(i) * time.Hour); !b.Time[i].Equal(want) {
			t.Fatalf("bar %d: time %v, want %v", i, b.Time[i], want)
		}
		fmt.Fprintf(&sb, "%s,%v,%v,%v,%v,%v\n", b.Time[i].Format(time.RFC3339), o, h, l, c, b.Volume[i])
	}
	if b.Open[0] != SyntheticLevel {
		t.Errorf("first open %v, want %v", b.Open[0], SyntheticLevel)
	}
	back, err := prices.ParseCSV(context.Background(), "synthetic.csv", strings.NewReader(sb.String()), prices.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	back.Name = b.Name
	if !reflect.DeepEqual(back, b) {
		t.Error("CSV round trip changed the bars")
	}
}

// TestSyntheticPlantedAutocorrelation measures the lag-1 autocorrelation of
// close-to-close log returns (sampling error ≈ 1/√n ≈ 0.005) and the scale
// of the series.
func TestSyntheticPlantedAutocorrelation(t *testing.T) {
	const n = 40000
	b, _, err := Synthetic(n, 11)
	if err != nil {
		t.Fatal(err)
	}
	r := make([]float64, n)
	for i := range r {
		r[i] = math.Log(b.Close[i] / b.Open[i])
	}
	var m float64
	for _, x := range r {
		m += x
	}
	m /= n
	var num, den float64
	for i := range r {
		den += (r[i] - m) * (r[i] - m)
		if i > 0 {
			num += (r[i] - m) * (r[i-1] - m)
		}
	}
	rho, sd := num/den, math.Sqrt(den/n)
	if math.Abs(rho-SyntheticPhi) > 0.025 {
		t.Errorf("lag-1 autocorrelation %.4f, want %.2f ± 0.025", rho, SyntheticPhi)
	}
	if sd < 0.002 || sd > 0.003 {
		t.Errorf("per-bar return sd %.5f, want 0.2%%-0.3%%", sd)
	}
	lo, hi := math.Inf(1), 0.0
	for _, c := range b.Close {
		lo, hi = min(lo, c), max(hi, c)
	}
	if lo < 500 || hi > 2000 {
		t.Errorf("close ranges over [%.0f, %.0f], want within [500, 2000] around %v", lo, hi, SyntheticLevel)
	}
}

// TestOracleIsRightAndProfitable checks the oracle's prediction against the
// generator's formula, its directional hit rate and that it makes money
// after slippage and commission with the default instrument: it holds the
// position chosen at t over bar t+1 (fill at open(t+1) ± 1 tick).
func TestOracleIsRightAndProfitable(t *testing.T) {
	b, o, err := Synthetic(20000, 5)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := ResolveInstrument(config.Defaults().Env, prices.SyntheticPath, b.Close[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	var hits, calls, prev int
	var pnl, sum, sumSq float64
	for i := 0; i+1 < b.Len(); i++ {
		prevClose := SyntheticLevel // C₋₁ = P₀
		if i > 0 {
			prevClose = b.Close[i-1]
		}
		want := SyntheticPhi*math.Log(b.Close[i]/prevClose) - SyntheticKappa*math.Log(b.Close[i]/SyntheticLevel)
		if p := o.Predict(i); math.Abs(p-want) > 1e-15 {
			t.Fatalf("Predict(%d) = %v, want %v", i, p, want)
		}
		a := o.Act(i, nil)
		if a.Size != NumSizes-1 || a.Exit != 0 {
			t.Fatalf("Act(%d) = %+v, want full size and no stop", i, a)
		}
		dir := a.Dir - 1
		pos := dir * inst.MaxContracts
		next := b.Close[i+1] - b.Open[i+1]
		if dir != 0 {
			calls++
			if float64(dir)*next > 0 {
				hits++
			}
		}
		perContract := inst.Slip(b.Open[i+1])*inst.PointValue + inst.Comm(b.Open[i+1])
		step := float64(pos)*next*inst.PointValue - math.Abs(float64(pos-prev))*perContract
		pnl += step
		sum += step / inst.InitialCapital
		sumSq += (step / inst.InitialCapital) * (step / inst.InitialCapital)
		prev = pos
	}
	hit := float64(hits) / float64(calls)
	steps := float64(b.Len() - 1)
	mean := sum / steps
	sharpe := mean / math.Sqrt(sumSq/steps-mean*mean) * math.Sqrt(b.BarsPerYear())
	t.Logf("oracle: %d positions, hit rate %.3f, net P&L %.0f on %.0f capital, Sharpe %.1f", calls, hit, pnl, inst.InitialCapital, sharpe)
	if calls < b.Len()/4 || hit < 0.58 {
		t.Errorf("oracle took %d positions with hit rate %.3f, want ≥ %d positions and hit rate ≥ 0.58", calls, hit, b.Len()/4)
	}
	if pnl <= 0 || sharpe < 5 {
		t.Errorf("oracle net P&L %.0f, Sharpe %.1f after costs: want a profit and Sharpe ≥ 5", pnl, sharpe)
	}
	if a := o.Act(-1, nil); a.Dir != 1 {
		t.Errorf("Act(-1) = %+v, want flat", a)
	}
}
