package gpu

import (
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// newActs allocates the buffers of a forward pass over rows observations:
// every row's layers pass through device memory.
func (l *learner) newActs(alloc func(int) cuda.DevPtr, rows int) acts {
	e, m := l.esz, l.m
	return acts{rows: rows, h1: alloc(e * rows * m.Trunk1), h2: alloc(e * rows * m.Trunk2), z: alloc(e * rows * 4 * m.Head), o: alloc(4 * rows * l.outw)}
}

// fwdNet is one network's forward pass over a.rows observations at x into
// a, its hidden activations (a.h1, a.h2, a.z) kept for the backward pass.
type fwdNet struct {
	net *netBufs
	x   cuda.DevPtr
	a   *acts
}

// forwardLaunches returns the launches of the forward passes nets: four
// grouped gemm launches, one a layer, each layer's activations through
// device memory (the fused forward of ADR 0018, one launch with the hidden
// layers in shared memory, was measured slower at every batch and
// removed); st is the step state the launches check for an abort, or 0
// for launches that always run (inference).
func (l *learner) forwardLaunches(c *cuda.Ctx, name string, nets []fwdNet, st cuda.DevPtr) ([]launch, error) {
	var stages [4][]job
	for _, f := range nets {
		js := l.forwardJobs(f.net, f.x, f.a)
		for s := range stages {
			stages[s] = append(stages[s], js[s]...)
		}
	}
	out := make([]launch, 0, len(stages))
	for s := range stages {
		shape := ""
		if s == len(stages)-1 {
			shape = l.s.HeadOutShape
		}
		ln, err := l.gemmLaunchIn(c, name, stages[s], st, shape)
		if err != nil {
			return nil, err
		}
		out = append(out, ln)
	}
	return out, nil
}

// ForwardPath says how the trainer's forward pass runs: "layered" (four
// gemm launches), and after a comma the GEMM path where its products run
// on wgmma.
func (t *Trainer) ForwardPath() string {
	if t.l.k.wgmma {
		if !t.l.bf16 {
			return "layered, " + t.l.s.wgmma.desc + ", 3xTF32"
		}
		return "layered, " + t.l.s.wgmma.desc
	}
	return "layered"
}

// Launches says how the kernels of the trainer's CUDA graphs follow each
// other: "programmatic dependent", or "serial: " and why
// (dependentLaunches).
func (t *Trainer) Launches() string { return t.l.s.launch.desc }

// StepsPerGraph is how many training steps one launch of the training
// graph replays (Tuning.StepsPerGraph, default 8: ADR 0027).
func (t *Trainer) StepsPerGraph() int { return t.l.s.StepsPerGraph }
