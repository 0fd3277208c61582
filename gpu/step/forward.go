package step

import (
	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// NewActs allocates the buffers of a forward pass over rows observations:
// every row's layers pass through device memory.
func (l *Learner) NewActs(alloc func(int) cuda.DevPtr, rows int) Acts {
	e, m := l.ESize, l.M
	return Acts{Rows: rows, h1: alloc(e * rows * m.Trunk1), h2: alloc(e * rows * m.Trunk2), z: alloc(e * rows * 4 * m.Head), O: alloc(4 * rows * l.OutW)}
}

// FwdNet is one network's forward pass over a.rows observations at x into
// a, its hidden activations (a.h1, a.h2, a.z) kept for the backward pass.
type FwdNet struct {
	Net *netBufs
	X   cuda.DevPtr
	A   *Acts
}

// ForwardLaunches returns the launches of the forward passes nets: four
// grouped gemm launches, one a layer, each layer's activations through
// device memory (the fused forward of ADR 0018, one launch with the hidden
// layers in shared memory, was measured slower at every batch and
// removed); st is the step state the launches check for an abort, or 0
// for launches that always run (inference).
func (l *Learner) ForwardLaunches(c *cuda.Ctx, name string, nets []FwdNet, st cuda.DevPtr) ([]device.Launch, error) {
	var stages [4][]job
	for _, f := range nets {
		js := l.forwardJobs(f.Net, f.X, f.A)
		for s := range stages {
			stages[s] = append(stages[s], js[s]...)
		}
	}
	out := make([]device.Launch, 0, len(stages))
	for s := range stages {
		shape := ""
		if s == len(stages)-1 {
			shape = l.S.HeadOutShape
		}
		ln, err := l.gemmLaunchIn(c, name, stages[s], st, shape)
		if err != nil {
			return nil, err
		}
		out = append(out, ln)
	}
	return out, nil
}

// RowLayers writes the forward pass of the online network for one
// observation as struct RowLayer entries, the same products as
// forwardJobs: s1 and s2 with bias+ReLU, the head-hidden block (wcat,
// bcat), then the four head outputs into their columns of O.
func (l *Learner) RowLayers(w *device.Words) {
	net, m, lay := &l.Online, l.M, &l.Lay
	bias := func(i int) cuda.DevPtr { return net.p + cuda.DevPtr(4*lay[i].B) }
	row := func(wt, b cuda.DevPtr, n, k, in, inOff, out, outOff, relu int) {
		w.Ptr(wt).Ptr(b).I64(int64(n)).I64(int64(k)).I64(int64(in)).I64(int64(inOff)).I64(int64(out)).I64(int64(outOff)).I64(int64(relu))
	}
	row(l.weight(net, model.LayerS1), bias(model.LayerS1), m.Trunk1, lay[model.LayerS1].In, 0, 0, 1, 0, 1)
	row(l.weight(net, model.LayerS2), bias(model.LayerS2), m.Trunk2, m.Trunk1, 1, 0, 2, 0, 1)
	row(net.wcat, net.bcat, 4*m.Head, m.Trunk2, 2, 0, 3, 0, 1)
	for h, i := range HeadOut {
		row(l.weight(net, i), bias(i), lay[i].Out, m.Head, 3, h*m.Head, 4, headCol(m.Atoms, i), 0)
	}
}
