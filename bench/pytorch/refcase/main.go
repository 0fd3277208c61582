// Command refcase writes training steps of the CPU reference learner
// (trainer/cpu) to a safetensors file, so that bench/pytorch/crosscheck.py
// can check that the PyTorch reference computes the same function: the same
// weights and batch go into both, and the forward distributions, the loss,
// the per-sample losses, the gradient, the state after one Step (gradient
// clipping, AdamW, the spectral bound) and after SyncTarget are compared.
//
//	go run ./bench/pytorch/refcase -out bench/pytorch/refcase.safetensors
//	python3 bench/pytorch/crosscheck.py bench/pytorch/refcase.safetensors
//
// Three cases are written: "default" (config.Defaults in fp32, where
// neither the clipping nor the spectral bound acts on a fresh network),
// "tight" (fp32 with clip_norm 0.01 and spectral_bound 1, so that both act)
// and "mixed" (the defaults in bf16-mixed, for the bf16 autocast variants).
// For each case C the file holds
//
//	C.before.<name>  the learner's Tensors() before the step
//	C.obs, C.next_obs [n, ObsDim] F32, C.actions [n, 3] I32 (per branch),
//	C.return, C.discount, C.weight [n] F32: the batch
//	C.dist           [n, NumActions, Atoms] F32: online distributions at obs
//	C.loss, C.grad_norm [1] F64, C.per_sample [n] F32, C.grad [P] F32 (Layout
//	                 order): Learner.Gradient
//	C.after.<name>   Tensors() after Step on the same batch
//	C.synced.<name>  the target blocks after SyncTarget(target_tau)
//
// and the metadata key C.config holds the precision, model and optimiser
// config.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/trainer/model"
)

func main() {
	out := flag.String("out", "refcase.safetensors", "output file")
	n := flag.Int("batch", 64, "batch size")
	seed := flag.Uint64("seed", 1, "seed of the weights and of the batch")
	flag.Parse()
	if err := run(*out, *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "refcase:", err)
		os.Exit(1)
	}
}

func run(out string, n int, seed uint64) error {
	if n < 1 {
		return fmt.Errorf("-batch %d: must be at least 1", n)
	}
	def := config.Defaults()
	tight := def.Optim
	tight.ClipNorm, tight.SpectralBound = 0.01, 1
	ck := &checkpoint.Checkpoint{Meta: map[string]string{"format": "dqnflow-refcase/1"}}
	for _, c := range []struct {
		name, precision string
		opt             config.OptimConfig
	}{
		{"default", config.PrecisionFP32, def.Optim},
		{"tight", config.PrecisionFP32, tight},
		{"mixed", config.PrecisionBF16Mixed, def.Optim},
	} {
		if err := addCase(ck, c.name, c.precision, def.Model, c.opt, n, seed); err != nil {
			return fmt.Errorf("case %s: %w", c.name, err)
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := checkpoint.Encode(f, ck); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addCase(ck *checkpoint.Checkpoint, name, precision string, m config.ModelConfig, o config.OptimConfig, n int, seed uint64) error {
	l, err := cpu.NewLearner(m, o, precision, seed)
	if err != nil {
		return err
	}
	cfg, err := json.Marshal(struct {
		Precision string             `json:"precision"`
		Model     config.ModelConfig `json:"model"`
		Optim     config.OptimConfig `json:"optim"`
		Batch     int                `json:"batch"`
		Seed      uint64             `json:"seed"`
	}{precision, m, o, n, seed})
	if err != nil {
		return err
	}
	ck.Meta[name+".config"] = string(cfg)
	add := func(prefix string, ts []checkpoint.Tensor) {
		for _, t := range ts {
			t.Name = name + "." + prefix + t.Name
			ck.Tensors = append(ck.Tensors, t)
		}
	}
	add("before.", l.Tensors())

	discount := float32(math.Pow(o.Gamma, float64(o.NStep)))
	b := randomBatch(n, discount, rand.New(rand.NewPCG(seed, 0x7265_6663_6173_65))) // "refcase"
	na := model.NumActions
	acts := make([]int32, len(b.Actions))
	copy(acts, b.Actions)
	add("", []checkpoint.Tensor{
		checkpoint.F32Tensor("obs", []int{n, market.ObsDim}, b.Obs),
		checkpoint.F32Tensor("next_obs", []int{n, market.ObsDim}, b.NextObs),
		checkpoint.I32Tensor("actions", []int{n, model.NumBranches}, acts),
		checkpoint.F32Tensor("return", []int{n}, b.Return),
		checkpoint.F32Tensor("discount", []int{n}, b.Discount),
		checkpoint.F32Tensor("weight", []int{n}, b.Weight),
	})

	dist := make([]float32, n*na*m.Atoms)
	if err := l.Online().Distributions(b.Obs, n, dist); err != nil {
		return err
	}
	grad := make([]float32, l.NumParams())
	g, err := l.Gradient(b, grad)
	if err != nil {
		return err
	}
	add("", []checkpoint.Tensor{
		checkpoint.F32Tensor("dist", []int{n, na, m.Atoms}, dist),
		checkpoint.F64Tensor("loss", []int{1}, []float64{g.Loss}),
		checkpoint.F64Tensor("grad_norm", []int{1}, []float64{g.GradNorm}),
		checkpoint.F32Tensor("per_sample", []int{n}, append([]float32(nil), g.PerSample...)),
		checkpoint.F32Tensor("grad", []int{len(grad)}, grad),
	})
	if _, err := l.Step(b); err != nil {
		return err
	}
	add("after.", l.Tensors())
	if err := l.SyncTarget(o.TargetTau); err != nil {
		return err
	}
	var synced []checkpoint.Tensor
	for _, t := range l.Tensors() {
		if strings.HasPrefix(t.Name, "target.") {
			synced = append(synced, t)
		}
	}
	add("synced.", synced)
	return nil
}

// randomBatch draws a batch that reaches every case of the C51 projection:
// returns from N(0, 3²) so that some targets clip at v_min or v_max, a
// discount of γⁿ or 0 (done, one in five), weights in (0.1, 1].
func randomBatch(n int, discount float32, r *rand.Rand) *model.Batch {
	b := &model.Batch{
		Obs:      make([]float32, n*market.ObsDim),
		NextObs:  make([]float32, n*market.ObsDim),
		Actions:  make([]int32, n*model.NumBranches),
		Return:   make([]float32, n),
		Discount: make([]float32, n),
		Weight:   make([]float32, n),
	}
	for i := range b.Obs {
		b.Obs[i] = float32(r.NormFloat64())
		b.NextObs[i] = float32(r.NormFloat64())
	}
	for i := 0; i < n; i++ {
		for d, nd := range market.BranchSizes {
			b.Actions[i*model.NumBranches+d] = int32(r.IntN(nd))
		}
		b.Return[i] = float32(3 * r.NormFloat64())
		if r.IntN(5) > 0 {
			b.Discount[i] = discount
		}
		b.Weight[i] = float32(0.1 + 0.9*(1-r.Float64()))
	}
	b.Weight[0] = 1
	return b
}
