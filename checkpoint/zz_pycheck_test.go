package checkpoint_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/cpu"
)

func TestZZPyCheck(t *testing.T) {
	m := config.Defaults().Model
	m.Trunk1, m.Trunk2, m.Head, m.Atoms = 32, 24, 16, 11
	net, err := cpu.NewNet(m, "fp32", 7)
	if err != nil {
		t.Fatal(err)
	}
	p := net.Params()
	var ts []checkpoint.Tensor
	for _, b := range cpu.Layout(m) {
		ts = append(ts, checkpoint.F32Tensor("online."+b.Name, b.Shape(), p[b.Offset:b.Offset+b.Size()]))
	}
	ts = append(ts, checkpoint.I64Tensor("adam.step", []int{1}, []int64{5}), checkpoint.U8Tensor("odd", []int{3}, []byte{1, 2, 3}))
	cfg := `{"model":{"trunk1":32,"trunk2":24,"head":16,"atoms":11,"v_min":-10,"v_max":10}}`
	ck := &checkpoint.Checkpoint{Meta: map[string]string{checkpoint.MetaConfig: cfg, checkpoint.MetaRunID: "py"}, Tensors: ts}
	if _, err := checkpoint.Write("/tmp/pycheck/full.safetensors", ck); err != nil {
		t.Fatal(err)
	}
	for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16, checkpoint.F16} {
		ex, _, err := checkpoint.Export(ck, dt, "online.")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.Write("/tmp/pycheck/policy-"+string(dt)+".safetensors", ex); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	rows := 5
	obs := make([]float32, rows*market.ObsDim)
	for i := range obs {
		obs[i] = float32(r.NormFloat64())
	}
	q := make([]float32, rows*cpu.NumActions)
	if err := net.QValues(obs, rows, q); err != nil {
		t.Fatal(err)
	}
	wr := func(name string, v []float32) {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		os.WriteFile("/tmp/pycheck/"+name, b, 0o644)
	}
	wr("obs.f32", obs)
	wr("q.f32", q)
}
