package checkpoint

import (
	"path/filepath"
	"testing"
)

// BenchmarkWrite15MB writes a checkpoint of the size a default run's
// holds once its replay buffer is full (about 15 MB): encoding, both
// SHA-256 passes (the tensors' and the whole file's), the fsync and the
// rename (docs/perf/gpu-2026-12-04.md: 45–51 ms on the development
// machine, 27 of them hashing).
func BenchmarkWrite15MB(b *testing.B) {
	data := make([]byte, 15<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ck := &Checkpoint{
		Meta:    map[string]string{MetaFormat: FormatVersion},
		Tensors: []Tensor{{Name: "x", DType: U8, Shape: []int{len(data)}, Data: data}},
	}
	path := filepath.Join(b.TempDir(), "epoch-000001.safetensors")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Write(path, ck, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
