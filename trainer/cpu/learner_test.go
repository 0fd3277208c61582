package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/blas"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// mediumModel spans several GEMM tiles at batch 40 (80 forward rows).
var mediumModel = config.ModelConfig{Trunk1: 200, Trunk2: 64, Head: 32, Atoms: 21, VMin: -10, VMax: 10}

// state returns everything a learner carries between steps.
func state(l *Learner) [][]float32 {
	s := [][]float32{l.online.params, l.target.params, l.online.gw, l.target.gw, l.m, l.v}
	return append(s, l.u[:]...)
}

// sameBits reports the first index where a and b differ bit for bit.
func sameBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return 0, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

// TestStepIsDeterministic checks that two learners with the same seed,
// fed the same batches, hold bit-identical state after several steps, in
// both precision modes, whatever the number of GEMM workers.
func TestStepIsDeterministic(t *testing.T) {
	for _, precision := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed} {
		a := testLearner(t, mediumModel, refOptim, precision, 42)
		b := testLearner(t, mediumModel, refOptim, precision, 42)
		a.SetThreads(1)
		b.SetThreads(3)
		ra, rb := rand.New(rand.NewPCG(1, 1)), rand.New(rand.NewPCG(1, 1))
		for step := 0; step < 3; step++ {
			resA, errA := a.Step(randomBatch(ra, 40))
			resB, errB := b.Step(randomBatch(rb, 40))
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if resA.Loss != resB.Loss || resA.GradNorm != resB.GradNorm {
				t.Fatalf("%s step %d: loss %v / %v, grad norm %v / %v", precision, step, resA.Loss, resB.Loss, resA.GradNorm, resB.GradNorm)
			}
		}
		if err := a.SyncTarget(0.3); err != nil {
			t.Fatal(err)
		}
		if err := b.SyncTarget(0.3); err != nil {
			t.Fatal(err)
		}
		sa, sb := state(a), state(b)
		for k := range sa {
			if i, ok := sameBits(sa[k], sb[k]); !ok {
				t.Fatalf("%s: state %d differs at %d: %g vs %g", precision, k, i, sa[k][i], sb[k][i])
			}
		}
		c := testLearner(t, mediumModel, refOptim, precision, 43)
		if _, ok := sameBits(c.online.params, a.online.params); ok {
			t.Errorf("%s: seeds 42 and 43 give the same parameters", precision)
		}
	}
}

// TestStepIsDeterministicOnEachBLAS checks that on every available BLAS
// two learners with the same seed and batches hold bit-identical state
// after several steps at batch 256 on the default model (shapes at which
// OpenBLAS runs its GEMMs on several threads), at the process's thread
// count.
func TestStepIsDeterministicOnEachBLAS(t *testing.T) {
	d := config.Defaults()
	for _, lib := range blas.Available(0) {
		t.Run(lib.Name(), func(t *testing.T) {
			var ref [][]float32
			for run := 0; run < 2; run++ {
				l := testLearner(t, d.Model, d.Optim, config.PrecisionFP32, 7)
				l.SetBLAS(lib)
				r := rand.New(rand.NewPCG(2, 2))
				for step := 0; step < 3; step++ {
					if _, err := l.Step(randomBatch(r, 256)); err != nil {
						t.Fatal(err)
					}
				}
				s := state(l)
				if ref == nil {
					ref = s
					continue
				}
				for k := range s {
					if i, ok := sameBits(ref[k], s[k]); !ok {
						t.Fatalf("%s: state %d differs at %d: %g vs %g", lib.Describe(), k, i, ref[k][i], s[k][i])
					}
				}
			}
		})
	}
}

// TestLoadTensorsResumesBitIdentical checks that a learner restored from
// Tensors continues exactly as the original.
func TestLoadTensorsResumesBitIdentical(t *testing.T) {
	for _, precision := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed} {
		a := testLearner(t, refModel, refOptim, precision, 1)
		r := rand.New(rand.NewPCG(5, 6))
		for range 2 {
			if _, err := a.Step(randomBatch(r, 8)); err != nil {
				t.Fatal(err)
			}
		}
		b := testLearner(t, refModel, refOptim, precision, 99)
		if err := b.LoadTensors(&checkpoint.Checkpoint{Tensors: a.Tensors()}); err != nil {
			t.Fatal(err)
		}
		if b.Steps() != 2 {
			t.Errorf("restored step = %d, want 2", b.Steps())
		}
		batch := randomBatch(r, 8)
		resA, errA := a.Step(batch)
		perA := append([]float32(nil), resA.PerSample...)
		resB, errB := b.Step(batch)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if i, ok := sameBits(perA, resB.PerSample); !ok {
			t.Errorf("%s: per-sample loss %d after resume: %g vs %g", precision, i, perA[i], resB.PerSample[i])
		}
		sa, sb := state(a), state(b)
		for k := range sa {
			if i, ok := sameBits(sa[k], sb[k]); !ok {
				t.Fatalf("%s: state %d differs at %d after resume", precision, k, i)
			}
		}
	}
}

// TestTensorsNamesAndShapes checks the checkpoint tensor list of the
// default model.
func TestTensorsNamesAndShapes(t *testing.T) {
	m := config.Defaults().Model
	l, err := NewLearner(m, config.Defaults().Optim, config.PrecisionFP32, 1)
	if err != nil {
		t.Fatal(err)
	}
	ts := l.Tensors()
	if len(ts) != 2*2*model.NumLayers+3+model.NumLayers {
		t.Fatalf("%d tensors, want %d", len(ts), 2*2*model.NumLayers+3+model.NumLayers)
	}
	want := map[string]string{
		"online.s1.weight": "F32 [256 64]", "online.s1.bias": "F32 [256]",
		"target.a2_1.weight": "F32 [204 128]", "target.a2_1.bias": "F32 [204]",
		"adam.m": "F32 [286385]", "adam.v": "F32 [286385]", "adam.step": "I64 [1]",
		"spectral.s1.u": "F32 [256]", "spectral.a2_2.u": "F32 [153]",
	}
	for _, tn := range ts {
		if w, ok := want[tn.Name]; ok {
			if got := fmt.Sprintf("%s %v", tn.DType, tn.Shape); got != w {
				t.Errorf("%s: %s, want %s", tn.Name, got, w)
			}
			delete(want, tn.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing tensors: %v", want)
	}
}

// TestLoadTensorsRejectsBadCheckpoints checks that a missing, mistyped,
// misshapen, duplicated or non-finite tensor is an error naming it, and
// that the learner is unchanged afterwards.
func TestLoadTensorsRejectsBadCheckpoints(t *testing.T) {
	src := testLearner(t, refModel, refOptim, config.PrecisionFP32, 2)
	dst := testLearner(t, refModel, refOptim, config.PrecisionFP32, 3)
	before := dst.online.Params()
	edit := func(name string, f func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor) *checkpoint.Checkpoint {
		ts := src.Tensors()
		for i := range ts {
			if ts[i].Name == name {
				return &checkpoint.Checkpoint{Tensors: f(ts, i)}
			}
		}
		t.Fatalf("no tensor %s", name)
		return nil
	}
	for _, c := range []struct {
		name, tensor, want string
		f                  func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor
	}{
		{"missing", "target.v2.bias", "missing", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			return append(ts[:i], ts[i+1:]...)
		}},
		{"dtype", "adam.step", "dtype F32, want I64", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			ts[i] = checkpoint.F32Tensor("adam.step", []int{1}, []float32{1})
			return ts
		}},
		{"shape", "online.s2.weight", "shape [16 8], want [16 16]", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			ts[i] = checkpoint.F32Tensor("online.s2.weight", []int{16, 8}, make([]float32, 128))
			return ts
		}},
		{"short data", "spectral.v1.u", "bytes of data", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			ts[i].Data = ts[i].Data[:4]
			return ts
		}},
		{"NaN", "online.a1_2.weight", "element 3 is NaN", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			copy(ts[i].Data[12:], checkpoint.F32Tensor("", nil, []float32{float32(math.NaN())}).Data)
			return ts
		}},
		{"duplicate", "adam.m", "more than once", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			return append(ts, ts[i])
		}},
		{"negative step", "adam.step", "must not be negative", func(ts []checkpoint.Tensor, i int) []checkpoint.Tensor {
			ts[i] = checkpoint.I64Tensor("adam.step", []int{1}, []int64{-1})
			return ts
		}},
	} {
		err := dst.LoadTensors(edit(c.tensor, c.f))
		if err == nil || !strings.Contains(err.Error(), c.tensor) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", c.name, err, c.tensor, c.want)
		}
	}
	if _, ok := sameBits(before, dst.online.params); !ok || dst.step != 0 {
		t.Error("a failed LoadTensors changed the learner")
	}
	if err := dst.LoadTensors(nil); err == nil {
		t.Error("LoadTensors(nil) succeeded")
	}
}

// policyNet builds a network of model m from the online tensors of ck, as
// trainer/policy does.
func policyNet(m config.ModelConfig, precision string, ck *checkpoint.Checkpoint) (*Net, error) {
	p, err := model.ReadParams(ck, model.PrefixOnline, m)
	if err != nil {
		return nil, err
	}
	net, err := NewNet(m, precision, 0)
	if err != nil {
		return nil, err
	}
	return net, net.SetParams(p)
}

// TestPolicyNetMatchesLearner checks that a network built from a
// checkpoint's online tensors computes the learner's Q values bit for bit,
// that they are the expectations of its Distributions, and that Greedy
// takes each branch's argmax of them.
func TestPolicyNetMatchesLearner(t *testing.T) {
	l := testLearner(t, refModel, refOptim, config.PrecisionBF16Mixed, 4)
	if _, err := l.Step(randomBatch(rand.New(rand.NewPCG(2, 2)), 8)); err != nil {
		t.Fatal(err)
	}
	net, err := policyNet(refModel, config.PrecisionBF16Mixed, &checkpoint.Checkpoint{Tensors: l.Tensors()})
	if err != nil {
		t.Fatal(err)
	}
	const rows = 5
	obs := randomBatch(rand.New(rand.NewPCG(3, 3)), rows).Obs
	qa, qb := make([]float32, rows*model.NumActions), make([]float32, rows*model.NumActions)
	if err := l.QValues(obs, rows, qa); err != nil {
		t.Fatal(err)
	}
	if err := net.QValues(obs, rows, qb); err != nil {
		t.Fatal(err)
	}
	if i, ok := sameBits(qa, qb); !ok {
		t.Fatalf("Q[%d]: learner %g, policy net %g", i, qa[i], qb[i])
	}
	p := make([]float32, rows*model.NumActions*refModel.Atoms)
	if err := net.Distributions(obs, rows, p); err != nil {
		t.Fatal(err)
	}
	qp := make([]float32, rows*model.NumActions)
	expected(p, net.support, qp)
	if i, ok := sameBits(qa, qp); !ok {
		t.Fatalf("Q[%d] = %g, Σ_j p_j·z_j of Distributions = %g", i, qa[i], qp[i])
	}
	acts := make([]market.Action, rows)
	if err := net.Greedy(obs, rows, acts); err != nil {
		t.Fatal(err)
	}
	for r, a := range acts {
		q := qa[r*model.NumActions:]
		for d, got := range []int{a.Dir, a.Size, a.Exit} {
			for k := 0; k < market.BranchSizes[d]; k++ {
				if q[model.BranchOffset[d]+k] > q[model.BranchOffset[d]+got] {
					t.Errorf("row %d branch %d: greedy %d but Q[%d] = %g > %g", r, d, got, k, q[model.BranchOffset[d]+k], q[model.BranchOffset[d]+got])
				}
			}
		}
	}
	if _, err := policyNet(mediumModel, config.PrecisionFP32, &checkpoint.Checkpoint{Tensors: l.Tensors()}); err == nil ||
		!strings.Contains(err.Error(), "online.s1.weight") {
		t.Errorf("policy net for another model: error %v, want one naming online.s1.weight", err)
	}
}

// TestQValuesAreBatchInvariant checks that an observation's Q values do
// not depend on the other observations evaluated with it, across chunks of
// inferRows and GEMM tiles.
func TestQValuesAreBatchInvariant(t *testing.T) {
	net, err := NewNet(mediumModel, config.PrecisionFP32, 8)
	if err != nil {
		t.Fatal(err)
	}
	const rows = inferRows + 77
	obs := randomBatch(rand.New(rand.NewPCG(4, 4)), rows).Obs
	all := make([]float32, rows*model.NumActions)
	if err := net.QValues(obs, rows, all); err != nil {
		t.Fatal(err)
	}
	one := make([]float32, model.NumActions)
	for _, r := range []int{0, 63, 64, inferRows - 1, inferRows, rows - 1} {
		if err := net.QValues(obs[r*market.ObsDim:(r+1)*market.ObsDim], 1, one); err != nil {
			t.Fatal(err)
		}
		if i, ok := sameBits(one, all[r*model.NumActions:(r+1)*model.NumActions]); !ok {
			t.Errorf("row %d, Q[%d]: alone %g, in a batch of %d %g", r, i, one[i], rows, all[r*model.NumActions+i])
		}
	}
}

// TestSyncTargetIsEMA checks target ← τ·online + (1−τ)·target against the
// float64 formula, and that τ = 1 copies exactly.
func TestSyncTargetIsEMA(t *testing.T) {
	l := testLearner(t, refModel, refOptim, config.PrecisionFP32, 6)
	on, tg := l.online.Params(), l.target.Params()
	if err := l.SyncTarget(0.25); err != nil {
		t.Fatal(err)
	}
	for i := range on {
		a, b := 0.25*float64(on[i]), 0.75*float64(tg[i])
		// Three float32 roundings: at most 1.5 ulps of the terms' size.
		if d := math.Abs(float64(l.target.params[i]) - (a + b)); d > 1.8e-7*(math.Abs(a)+math.Abs(b)) {
			t.Fatalf("target[%d] = %.9g, want %.9g", i, l.target.params[i], a+b)
		}
	}
	if err := l.SyncTarget(1); err != nil {
		t.Fatal(err)
	}
	if i, ok := sameBits(l.target.params, on); !ok {
		t.Errorf("τ = 1: target[%d] = %g, online %g", i, l.target.params[i], on[i])
	}
	for _, tau := range []float64{0, -0.5, 1.5, math.NaN()} {
		if err := l.SyncTarget(tau); err == nil {
			t.Errorf("SyncTarget(%g) succeeded", tau)
		}
	}
}

// TestStepRejectsBadBatches checks that malformed batches are errors that
// name the field, and that they leave the learner unchanged.
func TestStepRejectsBadBatches(t *testing.T) {
	l := testLearner(t, refModel, refOptim, config.PrecisionFP32, 1)
	before := l.online.Params()
	for _, c := range []struct {
		name, want string
		f          func(b *model.Batch)
	}{
		{"empty", "empty", func(b *model.Batch) { *b = model.Batch{} }},
		{"short obs", "Obs has 255 values, want 256", func(b *model.Batch) { b.Obs = b.Obs[:255] }},
		{"short actions", "Actions has 11 values", func(b *model.Batch) { b.Actions = b.Actions[:11] }},
		{"bad action", "Actions[4] (sample 1, branch 1) = 4", func(b *model.Batch) { b.Actions[4] = 4 }},
		{"negative action", "Actions[0] (sample 0, branch 0) = -1", func(b *model.Batch) { b.Actions[0] = -1 }},
		{"discount", "Discount[2] = 1.5", func(b *model.Batch) { b.Discount[2] = 1.5 }},
		{"return", "Return[3] = +Inf", func(b *model.Batch) { b.Return[3] = float32(math.Inf(1)) }},
		{"weight", "Weight[1] = NaN", func(b *model.Batch) { b.Weight[1] = float32(math.NaN()) }},
		{"negative weight", "Weight[0] = -1", func(b *model.Batch) { b.Weight[0] = -1 }},
	} {
		b := randomBatch(rand.New(rand.NewPCG(1, 1)), 4)
		c.f(b)
		if _, err := l.Step(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := l.Step(nil); err == nil {
		t.Error("Step(nil) succeeded")
	}
	if _, ok := sameBits(before, l.online.params); !ok || l.step != 0 {
		t.Error("a rejected batch changed the learner")
	}
}

// TestStepStopsOnNonFinite checks that a NaN reaching the loss is an error
// wrapping trainer.ErrNonFinite and that no parameter changes.
func TestStepStopsOnNonFinite(t *testing.T) {
	l := testLearner(t, refModel, refOptim, config.PrecisionFP32, 1)
	before := l.online.Params()
	b := randomBatch(rand.New(rand.NewPCG(1, 1)), 4)
	b.Obs[5] = float32(math.NaN())
	_, err := l.Step(b)
	if !errors.Is(err, trainer.ErrNonFinite) {
		t.Fatalf("error %v, want one wrapping trainer.ErrNonFinite", err)
	}
	if _, ok := sameBits(before, l.online.params); !ok || l.step != 0 {
		t.Error("a non-finite step changed the learner")
	}
}

// TestLayoutIsContiguous checks the default layout: 20 blocks in order
// without gaps, 286,385 parameters, a2_d with n_d·Atoms rows.
func TestLayoutIsContiguous(t *testing.T) {
	m := config.Defaults().Model
	blocks := model.Layout(m)
	off := 0
	names := []string{}
	for _, b := range blocks {
		if b.Offset != off {
			t.Errorf("%s at %d, want %d", b.Name, b.Offset, off)
		}
		off += b.Size()
		names = append(names, b.Name)
	}
	if off != model.NumParams(m) || off != 286385 {
		t.Errorf("layout covers %d, NumParams %d, want 286385", off, model.NumParams(m))
	}
	want := "s1.weight s1.bias s2.weight s2.bias v1.weight v1.bias v2.weight v2.bias " +
		"a1_0.weight a1_0.bias a2_0.weight a2_0.bias a1_1.weight a1_1.bias a2_1.weight a2_1.bias " +
		"a1_2.weight a1_2.bias a2_2.weight a2_2.bias"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("blocks %s, want %s", got, want)
	}
	if b := blocks[14]; b.Rows != 4*51 || b.Cols != 128 {
		t.Errorf("a2_1.weight is %d×%d, want 204×128", b.Rows, b.Cols)
	}
}

// TestInitIsPyTorchUniform checks that every block lies in
// [−1/√in, 1/√in] and fills it: extremes near the bound, variance near
// bound²/3.
func TestInitIsPyTorchUniform(t *testing.T) {
	m := config.Defaults().Model
	net, err := NewNet(m, config.PrecisionFP32, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, blk := range model.Layout(m) {
		in := blk.Cols
		if blk.Bias { // a bias is drawn with its layer's fan-in
			w := model.Layout(m)[slices.IndexFunc(model.Layout(m), func(b model.Block) bool { return b.Offset+b.Size() == blk.Offset })]
			in = w.Cols
		}
		k := 1 / math.Sqrt(float64(in))
		var mx, ss float64
		for _, x := range net.params[blk.Offset : blk.Offset+blk.Size()] {
			mx = math.Max(mx, math.Abs(float64(x)))
			ss += float64(x) * float64(x)
		}
		if mx > k {
			t.Errorf("%s: |w| up to %g > 1/√%d = %g", blk.Name, mx, in, k)
		}
		if blk.Size() >= 1000 {
			if v := ss / float64(blk.Size()); math.Abs(v-k*k/3) > 0.1*k*k/3 || mx < 0.99*k {
				t.Errorf("%s: variance %g (want %g), max %g (want ≈ %g)", blk.Name, v, k*k/3, mx, k)
			}
		}
	}
}

// TestStepAllocatesNothing checks that a warmed-up step on a one-tile model
// does no heap allocation, on every available BLAS.
func TestStepAllocatesNothing(t *testing.T) {
	for _, lib := range blas.Available(1) {
		l := testLearner(t, refModel, refOptim, config.PrecisionBF16Mixed, 1)
		l.SetBLAS(lib)
		b := randomBatch(rand.New(rand.NewPCG(1, 1)), 16)
		if _, err := l.Step(b); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(5, func() {
			if _, err := l.Step(b); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: Step allocates %v times per call", lib.Name(), n)
		}
	}
	blas.Available(0) // the process's OpenBLAS threads back to GOMAXPROCS
}

// BenchmarkStep measures training steps of the default model at batch 256
// on every available BLAS with one and two threads.
func BenchmarkStep(b *testing.B) {
	for _, lib := range blas.Available(0) {
		for _, precision := range []string{config.PrecisionFP32, config.PrecisionBF16Mixed} {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/%s/threads=%d", lib.Name(), precision, threads), func(b *testing.B) {
					d := config.Defaults()
					l, err := NewLearner(d.Model, d.Optim, precision, 1)
					if err != nil {
						b.Fatal(err)
					}
					l.SetBLAS(lib)
					l.SetThreads(threads)
					batch := randomBatch(rand.New(rand.NewPCG(1, 1)), d.BatchSize)
					if _, err := l.Step(batch); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if _, err := l.Step(batch); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
				})
			}
		}
	}
}
