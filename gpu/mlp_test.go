package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// TestFusedForwardMatchesLayered runs the training step's forward passes
// (online over [s; s′] keeping the activations at s, target over s′) once
// fused and once layered on the same weights and observations, and
// requires the same bits: every head output of every row, and h1, h2 and
// z of the rows kept. Batches that end inside a row tile, several tiles
// per block of the persistent grid, and both tile heights.
func TestFusedForwardMatchesLayered(t *testing.T) {
	d := testDevice(t)
	m := config.Defaults().Model
	if err := fusedForwardFits(m); err != nil {
		t.Fatalf("the default network must fit the fused forward: %v", err)
	}
	for _, precision := range []string{config.PrecisionBF16Mixed, config.PrecisionBF16} {
		for _, tc := range []struct {
			n  int
			bm string
		}{{1, ""}, {300, ""}, {300, "128"}, {5000, "64"}, {17000, ""}} {
			t.Run(fmt.Sprintf("%s/n=%d/bm=%s", precision, tc.n, tc.bm), func(t *testing.T) {
				t.Setenv("DQNFLOW_FORWARD", "fused")
				t.Setenv("DQNFLOW_MLP_BM", tc.bm)
				err := d.dev.Do(func(c *cuda.Ctx) error { return checkFusedForward(c, d, m, precision, tc.n) })
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func checkFusedForward(c *cuda.Ctx, d *gpuDevice, m config.ModelConfig, precision string, n int) error {
	r := rand.New(rand.NewPCG(uint64(n), 11))
	st := model.NewState(m, 3)
	for i := range st.Online {
		st.Online[i] += float32(0.02 * r.NormFloat64())
		st.Target[i] = st.Online[i] + float32(0.02*r.NormFloat64())
	}
	l, err := newLearner(c, d, m, config.Defaults().Optim, precision, 3, st)
	if err != nil {
		return err
	}
	defer l.free(c)
	if !l.fused {
		return fmt.Errorf("precision %s: the learner does not run the fused forward", precision)
	}
	bt := l.mem.batch(c, l.stream)
	e := l.esz
	obs := make([]float32, 2*n*obsWidth)
	for i := range obs {
		obs[i] = float32(r.NormFloat64())
	}
	xf, x := bt.alloc(4*len(obs)), bt.alloc(e*len(obs))
	xs := x + cuda.DevPtr(e*n*obsWidth)
	full := func(rows int) acts {
		return acts{rows: rows, h1: bt.alloc(e * rows * m.Trunk1), h2: bt.alloc(e * rows * m.Trunk2),
			z: bt.alloc(e * rows * 4 * m.Head), o: bt.alloc(4 * rows * l.outw)}
	}
	// The fused pass gets buffers of exactly the rows it keeps, so a write
	// past them is an error of the memory checker (tools/device/visit.sh).
	fOn := acts{rows: 2 * n, h1: bt.alloc(e * n * m.Trunk1), h2: bt.alloc(e * n * m.Trunk2), z: bt.alloc(e * n * 4 * m.Head), o: bt.alloc(4 * 2 * n * l.outw)}
	fTg := acts{rows: n, o: bt.alloc(4 * n * l.outw)}
	lOn, lTg := full(2*n), full(n)
	if bt.err != nil {
		return bt.err
	}
	// NaN everywhere first: an output the kernels leave unwritten shows.
	for _, a := range []acts{fOn, fTg, lOn, lTg} {
		if err := c.MemsetD8Async(a.o, 0xff, 4*a.rows*l.outw, l.stream); err != nil {
			return err
		}
	}
	if err := cuda.Upload(c, xf, obs); err != nil {
		return err
	}
	if err := c.Launch(l.k.fn["cast_rows"], dim(ceilDiv(len(obs), 256)), dim(256), 0, l.stream, xf, x, int64(len(obs))); err != nil {
		return err
	}
	fused, err := l.forwardLaunches(c, "fused", []fwdNet{{&l.online, x, &fOn, n}, {&l.target, xs, &fTg, 0}}, l.st)
	if err != nil {
		return err
	}
	l.fused = false
	layered, err := l.forwardLaunches(c, "layered", []fwdNet{{&l.online, x, &lOn, n}, {&l.target, xs, &lTg, 0}}, l.st)
	l.fused = true
	if err != nil {
		return err
	}
	if len(fused) != 1 || len(layered) != 4 {
		return fmt.Errorf("%d fused and %d layered launches, want 1 and 4", len(fused), len(layered))
	}
	if err := l.runAll(c, append(fused, layered...)); err != nil {
		return err
	}
	if err := c.Sync(l.stream); err != nil {
		return err
	}
	cols, _ := headCols(m.Atoms)
	widths := [4]int{m.Atoms, market.BranchSizes[0] * m.Atoms, market.BranchSizes[1] * m.Atoms, market.BranchSizes[2] * m.Atoms}
	for _, o := range []struct {
		name      string
		got, want cuda.DevPtr
		rows      int
	}{{"online head outputs", fOn.o, lOn.o, 2 * n}, {"target head outputs", fTg.o, lTg.o, n}} {
		got, want := make([]uint32, o.rows*l.outw), make([]uint32, o.rows*l.outw)
		if err := cuda.Download(c, got, o.got); err != nil {
			return err
		}
		if err := cuda.Download(c, want, o.want); err != nil {
			return err
		}
		for row := range o.rows {
			for h := range 4 {
				for j := cols[h]; j < cols[h]+widths[h]; j++ {
					g, w := got[row*l.outw+j], want[row*l.outw+j]
					if g != w || math.IsNaN(float64(math.Float32frombits(g))) {
						return fmt.Errorf("%s, row %d of %d, column %d: fused %g (%#08x), layered %g (%#08x)", o.name, row, o.rows, j,
							math.Float32frombits(g), g, math.Float32frombits(w), w)
					}
				}
			}
		}
	}
	for _, a := range []struct {
		name      string
		got, want cuda.DevPtr
		cols      int
	}{{"h1", fOn.h1, lOn.h1, m.Trunk1}, {"h2", fOn.h2, lOn.h2, m.Trunk2}, {"z", fOn.z, lOn.z, 4 * m.Head}} {
		got, want := make([]uint16, n*a.cols), make([]uint16, n*a.cols)
		if err := cuda.Download(c, got, a.got); err != nil {
			return err
		}
		if err := cuda.Download(c, want, a.want); err != nil {
			return err
		}
		for i := range got {
			if got[i] != want[i] {
				return fmt.Errorf("%s, row %d of %d kept, column %d: fused %#04x, layered %#04x", a.name, i/a.cols, n, i%a.cols, got[i], want[i])
			}
		}
	}
	return nil
}

// TestForwardModeIsChecked: the layered forward is the default; a fused
// forward asked for where it cannot run, or an unknown mode, is an error
// that names the setting.
func TestForwardModeIsChecked(t *testing.T) {
	m := config.Defaults().Model
	for _, tc := range []struct {
		mode   string
		bf16   bool
		model  func(*config.ModelConfig)
		fused  bool
		errHas string
	}{
		{"", true, nil, false, ""},
		{"layered", true, nil, false, ""},
		{"fused", true, nil, true, ""},
		{"fused", false, nil, false, "precision fp32"},
		{"fused", true, func(m *config.ModelConfig) { m.Trunk1 = 200 }, false, "model.trunk1 = 200"},
		{"fast", true, nil, false, `DQNFLOW_FORWARD "fast"`},
	} {
		t.Setenv("DQNFLOW_FORWARD", tc.mode)
		mm := m
		if tc.model != nil {
			tc.model(&mm)
		}
		fused, err := useFused(mm, tc.bf16)
		if fused != tc.fused || (err == nil) != (tc.errHas == "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("DQNFLOW_FORWARD=%q bf16=%v: got %v, %v; want %v and an error containing %q", tc.mode, tc.bf16, fused, err, tc.fused, tc.errHas)
		}
	}
}
