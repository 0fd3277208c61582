// Package cpu is the numerical core of the CPU backend and reference: the
// distributional (C51), action-branching, dueling double-DQN of DESIGN.md
// §3, its loss and hand-written backward pass, AdamW with global-norm
// clipping, the spectral-norm bound and the EMA target update. The CUDA
// backend is tested against it, so every formula is written in the doc
// comment of the function that computes it, and every rounding step is
// fixed.
//
// # Network
//
// An observation of market.ObsDim features goes through
//
//	h1 = relu(s1(obs)), h2 = relu(s2(h1))
//	V  = v2(relu(v1(h2)))                       Atoms values
//	A_d = a2_d(relu(a1_d(h2)))                  n_d×Atoms values, d = 0, 1, 2
//	L_d[a, j] = V[j] + A_d[a, j] − mean_a' A_d[a', j]
//	p_d(a) = softmax_j L_d[a, ·]
//
// with branches of n = market.BranchSizes = [3, 4, 3] actions and the
// support z_j = v_min + j·Δz. All parameters live in one flat float32
// vector whose layout is the backend-neutral contract of trainer/model
// (model.Layers, model.Layout), shared with the GPU backend and
// checkpoints: per layer the weight [out×in] row-major, as PyTorch's
// nn.Linear stores it, then the bias. The initialisation streams
// (model.InitParams, model.InitSpectral), the support (model.Support),
// the minibatch (model.Batch) and the checkpointed learner state
// (model.State, with its tensor names) live there too. The trainer's
// experience collection (environments, exploration, n-step returns) is
// trainer/rollout's, shared with the GPU backend; this package keeps the
// replay sampling stream.
//
// # GEMMs and the BLAS
//
// The layers of one depth are stored side by side (see lvObs in net.go):
// the four heads' hidden layers v1, a1_0, a1_1, a1_2 read the same trunk
// output and run as one GEMM with their weights stacked, forward and for
// ∂loss/∂x; the online network runs on s and s′ as one batch of 2n rows.
// The GEMMs run on a blas.BLAS chosen at run time (Learner.SetBLAS; the
// trainer takes RunConfig.BLAS): OpenBLAS or Accelerate loaded with purego,
// or gonum, the portable reference. Outside the GEMMs a step takes
// softmaxes only where it reads them (all actions of the online network at
// s′, the taken actions at s, the chosen actions of the target network),
// with a float32 exp (exp32).
//
// # Determinism
//
// For a given seed, model, precision, BLAS and sequence of batches the
// results are bit-identical from run to run: every reduction outside the
// GEMMs is a sequential loop, products are converted to float32 explicitly
// so the compiler cannot fuse them into FMAs, and the GEMMs are
// deterministic (see package blas). On gonum they are moreover the same on
// every machine and do not depend on GOMAXPROCS or SetThreads: every GEMM
// output element is the float32 sum of its products in index order (see
// blas.Gonum.Sgemm), and a row's forward result does not depend on the
// other rows of its batch. On OpenBLAS the bits depend on the CPU's kernel
// and may depend on the thread count, and a row's result depends on the
// shape of the product it is computed in (measured: Q values of one
// observation alone and inside a batch of 589 differ in the last bits for
// every row); they stay within float32 rounding of gonum's
// (TestCrossCheckPassesWithEveryBLAS: ~4e-7 relative). The float32
// gradient matches float64 central differences to ~3e-7 relative
// (TestGradientsMatchFiniteDifferences).
//
// For comparing another backend with this one, Net.Logits,
// Net.Distributions, Net.QValues, Learner.Targets, Learner.Gradient and
// Learner.State expose every intermediate result that matters, and
// Learner.SetState loads the same state into both. StepLearner wraps a
// Learner for the cross-backend harness of trainer/trainertest
// (trainertest.CrossCheck), whose tests here show it exact against
// itself and sensitive to bf16 rounding and to small optimiser bugs.
//
// # Precision modes
//
// "fp32": everything is float32 (a few long reductions, noted where they
// happen, are float64).
//
// "bf16-mixed": exactly the operands of the GEMMs are rounded to bfloat16
// (bf16.Round, round to nearest even), as the GPU's tensor cores read
// them; the GEMMs accumulate in float32. Rounded are:
//
//   - the weights: a bf16 copy of the ten weight matrices, refreshed from
//     the float32 masters after every change (Step, SyncTarget, SetParams,
//     LoadTensors);
//   - forward activations entering a GEMM: the observation and the outputs
//     h1, h2, relu(v1), relu(a1_d), each rounded after bias and ReLU and
//     stored rounded (so the backward ReLU mask and dW read the rounded
//     value);
//   - backward: the gradient G = ∂loss/∂y of every layer's affine output,
//     after the bias gradient Σ_rows G has been taken from the unrounded G
//     and before both GEMMs, G·W (with the bf16 W) and Gᵀ·x (with the bf16
//     stored x).
//
// Biases, the outputs of v2 and a2_d, the dueling aggregation, softmax,
// log-softmax, targets, loss, gradients of parameters, clipping, AdamW and
// the spectral bound run on float32 values and float32 masters.
//
// "bf16" (bf16 storage everywhere) rounds as bf16-mixed does and, on top,
// keeps the whole trained state as bf16 values where the GPU stores bf16:
//
//   - the parameters of both networks, weights and biases: the
//     initialisation and every loaded state are rounded to the nearest
//     bf16, and every change is stored rounded: AdamW's new value (to the
//     nearest, or with optim.stochastic_rounding stochastically with the
//     bits bf16.SRBits(seed, Adam step, parameter index)), the spectral
//     step's scaled weights and the EMA target (to the nearest);
//   - the parameter gradient, rounded to the nearest bf16 after the
//     backward pass (so the gradient norm, the clipping and AdamW read
//     bf16 values; the bias sums are taken in float32 from the float32
//     upstream gradient, as in bf16-mixed);
//   - the AdamW moments m and v, stored rounded to the nearest bf16 (the
//     step uses the float32 values it computed);
//   - the spectral-norm vectors u, stored rounded to the nearest bf16.
//
// Arithmetic stays float32 (AdamW, clipping, spectral step, EMA, head and
// loss), as inside the GPU's kernels. The values are kept in float32
// slices: every stored value is exactly a bf16, so the results are those
// of bf16 storage. Learner.Stagnation measures how many updates the
// rounding of the stored parameter absorbs.
package cpu
