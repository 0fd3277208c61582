package parity

import (
	"math"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
)

// TestBF16SelectionWarns: selecting precision bf16 prints the measured
// parity verdict (or that it is not measured); the other modes print
// nothing.
func TestBF16SelectionWarns(t *testing.T) {
	cfg := config.Defaults()
	if w := Warning(cfg); w != "" {
		t.Errorf("fp32 warns: %s", w)
	}
	cfg.Precision = config.PrecisionBF16
	w := Warning(cfg)
	n := bf16Parity[false]
	switch {
	case n.Date == "" && !strings.Contains(w, "not been measured"):
		t.Errorf("unmeasured bf16: warning %q", w)
	case n.Date != "" && !n.Holds && !strings.Contains(w, n.Figure):
		t.Errorf("bf16 without parity: warning %q lacks the measured figure %q", w, n.Figure)
	case n.Date != "" && n.Holds && w != "":
		t.Errorf("bf16 holds parity but warns: %s", w)
	}
	saved := bf16Parity
	defer func() { bf16Parity = saved }()
	bf16Parity = map[bool]note{false: {Date: "2026-12-01", Command: "dqnflow parity --device cuda", Figure: "mean Q 34.3 % off (limit 10 %)"}}
	if w := Warning(cfg); !strings.Contains(w, "does not hold") || !strings.Contains(w, "mean Q 34.3 % off") {
		t.Errorf("warning %q does not name the measured figure", w)
	}
}

// TestParityChecksCompareWithFP32: each criterion is the relative
// difference with fp32's figure against its limit, a run that stopped
// early fails, and a zero reference gives a finite (JSON-safe) difference.
func TestParityChecksCompareWithFP32(t *testing.T) {
	eps := func(n int) []Epoch { return make([]Epoch, n) }
	ref := Run{Mode: modes["fp32"], Epochs: eps(5),
		Summary: Summary{FinalValidSharpe: 1, MeanQ: 2, GradNormMean: 3, GradNormMax: 4}}
	near := Run{Mode: modes["bf16-mixed"], Epochs: eps(5),
		Summary: Summary{FinalValidSharpe: 1.04, MeanQ: 2.19, GradNormMean: 3.5, GradNormMax: 4.7}}
	far := Run{Mode: modes["bf16"], Epochs: eps(5),
		Summary: Summary{FinalValidSharpe: 1.06, MeanQ: 2, GradNormMean: 3, GradNormMax: 4}}
	stopped := Run{Mode: modes["bf16-sr"], Epochs: eps(3), Error: "epoch 4: loss is NaN", Summary: ref.Summary}
	checks, holds := compare([]Run{ref, near, far, stopped})
	if !holds["bf16-mixed"] || holds["bf16"] || holds["bf16-sr"] {
		t.Errorf("holds %v; want bf16-mixed only (Sharpe 6 %% off fails, a stopped run fails)", holds)
	}
	for _, c := range checks {
		if c.Mode == "bf16" && c.Metric == "final validation Sharpe" && (c.Pass || math.Abs(c.RelDiff-0.06) > 1e-12) {
			t.Errorf("Sharpe check %+v, want rel. diff 0.06 failing the 5 %% limit", c)
		}
	}
	if d := relDiff(1, 0); math.IsInf(d, 0) || math.IsNaN(d) || d < 1e9 {
		t.Errorf("relDiff(1, 0) = %g, want huge and finite", d)
	}
}
