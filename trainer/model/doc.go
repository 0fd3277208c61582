// Package model is the contract every trainer backend shares: the network
// of DESIGN.md §3 as a flat parameter vector (Layers, Layout, NumParams),
// its branch and action counts, the initialisation streams (InitParams,
// InitSpectral), the C51 support (Support), a training minibatch (Batch),
// and the learner state that every backend checkpoints under the same
// tensor names (State, ReadState, ReadParams).
//
// It imports no backend. The CPU reference (trainer/cpu) and the CUDA
// backend (gpu/) both build on it, so that a checkpoint written by one
// restores on the other and the cross-backend harness in trainer/trainertest
// can load the same state into both.
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
// support z_j = v_min + j·Δz. Per layer the weight is stored [out×in]
// row-major, as PyTorch's nn.Linear stores it, then the bias; Layout gives
// every block's offset.
package model
