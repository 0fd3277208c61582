package trainertest

import "github.com/dqnflow/dqnflow/trainer/model"

// StepLearner is the single-step view of a backend's learner that the
// cross-backend harness (CrossCheck) drives: it loads the same state into
// the reference and the backend under test and compares what each
// computes. Every slice argument is caller-owned; results are copied into
// dst, perSample is owned by the caller after the call.
type StepLearner interface {
	// SetState loads the online and target parameters, the AdamW moments
	// and step and the spectral-norm vectors (and refreshes any bf16
	// copies). It validates s (model.State.Check).
	SetState(s *model.State) error
	// State copies the learner state back to the host.
	State() (*model.State, error)
	// Distributions writes the online network's probabilities p_j(s, a),
	// rows×NumActions×Atoms (actions branch after branch, atoms innermost).
	Distributions(obs []float32, rows int, dst []float32) error
	// Logits writes the online network's dueling logits L_d[a, j] before the
	// softmax, rows×NumActions×Atoms in the layout of Distributions.
	Logits(obs []float32, rows int, dst []float32) error
	// Targets writes the projected double-DQN C51 targets m of b,
	// n×NumBranches×Atoms, as the training step computes them (online
	// argmax at s′, target distribution, projection).
	Targets(b *model.Batch, dst []float32) error
	// Gradient writes ∂loss/∂θ of the online parameters (NumParams values,
	// Layout order, before clipping) and returns the loss and the
	// per-sample losses; it changes no state.
	Gradient(b *model.Batch, dst []float32) (loss float64, perSample []float32, err error)
	// Step runs one full training step: gradient, global-norm clipping,
	// AdamW, the spectral-norm step and the bf16 refresh. gradNorm is the
	// norm before clipping.
	Step(b *model.Batch) (loss, gradNorm float64, perSample []float32, err error)
	// SyncTarget applies target ← τ·online + (1−τ)·target.
	SyncTarget(tau float64) error
}

// Tolerances bounds the relative, norm-wise error ‖got − ref‖₂/‖ref‖₂ of
// each quantity CrossCheck compares (per parameter block where it applies):
//
//	Logits   dueling logits and probabilities of the online network
//	Loss     batch loss and per-sample losses
//	Grad     the gradient of every parameter block, and the gradient norm
//	Adam     AdamW: the moments of every block, and the update p_new − p_old
//	         of every block when no spectral scaling happens
//	Spectral the spectral-norm vectors u, and the update of every weight
//	         block when the spectral bound scales it
//	Sync     the target parameters after an EMA sync
//	Targets  the projected C51 targets
//
// A tolerance of 0 demands bit-identical results.
type Tolerances struct {
	Logits, Loss, Grad, Adam, Spectral, Sync, Targets float64
}

// FP32Tolerances is what a backend running fp32 must meet against the CPU
// fp32 reference (issue 7, §4): logits and loss within 1e-5, gradients
// within 1e-4. AdamW, the spectral step and the EMA inherit the gradient's
// error, or only their own rounding.
var FP32Tolerances = Tolerances{Logits: 1e-5, Loss: 1e-5, Grad: 1e-4, Adam: 1e-4, Spectral: 1e-4, Sync: 1e-6, Targets: 1e-5}

// BF16MixedTolerances is what a backend running bf16-mixed must meet
// against the CPU's bf16-mixed emulation (issue 7, §4): 2e-2 for every
// quantity.
var BF16MixedTolerances = Tolerances{Logits: 2e-2, Loss: 2e-2, Grad: 2e-2, Adam: 2e-2, Spectral: 2e-2, Sync: 2e-2, Targets: 2e-2}

// BF16Tolerances is what a backend running bf16 must meet against the
// CPU's bf16 emulation: BF16MixedTolerances, except for AdamW. A bf16
// weight moves by whole ulps, and an update near half an ulp (the
// regime of bf16 storage) rounds one way or the other on a float32
// difference far below the gradient's tolerance: each such element then
// differs by a whole ulp, about the size of the update itself. The
// update p_new − p_old and the stored moments are therefore compared at
// 0.1 (measured: see TestCrossCheckPassesBF16WithEveryBLAS, where
// another summation order flips a few elements the same way).
var BF16Tolerances = Tolerances{Logits: 2e-2, Loss: 2e-2, Grad: 2e-2, Adam: 0.1, Spectral: 2e-2, Sync: 2e-2, Targets: 2e-2}
