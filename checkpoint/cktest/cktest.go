// Package cktest damages real checkpoint files for tests: it changes a
// tensor's value or the header's text and then recomputes the file's two
// integrity hashes (reseals it), so that what a reader sees is a file that
// is intact as bytes but wrong in content — a NaN weight, a tensor left
// out, a metadata value changed after signing — the damage that only the
// completeness, finiteness and signature checks catch.
package cktest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
)

// SetF32 writes v into element i of the F32 tensor name of the checkpoint
// file at path and reseals the file.
func SetF32(t testing.TB, path, name string, i int, v float32) {
	t.Helper()
	b := read(t, path)
	header, data := split(t, b)
	begin, end := offsets(t, header, name)
	if 4*i+4 > end-begin {
		t.Fatalf("%s: tensor %s has %d elements, not %d", path, name, (end-begin)/4, i+1)
	}
	binary.LittleEndian.PutUint32(data[begin+4*i:], math.Float32bits(v))
	write(t, path, Reseal(b))
}

// DropTensor removes tensor name from the checkpoint file at path (its
// entry and its bytes) and reseals the file. The header keeps its other
// entries as they were, and later tensors' offsets move down.
func DropTensor(t testing.TB, path, name string) {
	t.Helper()
	b := read(t, path)
	header, data := split(t, b)
	begin, end := offsets(t, header, name)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatal(err)
	}
	delete(h, name)
	for k, raw := range h {
		if k == "__metadata__" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		off := e["data_offsets"].([]any)
		b0, e0 := int(off[0].(float64)), int(off[1].(float64))
		if b0 >= end {
			e["data_offsets"] = []int{b0 - (end - begin), e0 - (end - begin)}
		}
		h[k], _ = json.Marshal(e)
	}
	nh, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	nd := append(bytes.Clone(data[:begin]), data[end:]...)
	write(t, path, Reseal(assemble(nh, nd)))
}

// ReplaceInHeader replaces the one occurrence of old in the header text of
// the checkpoint file at path by new (say a metadata value), pads the
// header again and reseals the file. A signature in the header is left as
// it was.
func ReplaceInHeader(t testing.TB, path, old, new string) {
	t.Helper()
	b := read(t, path)
	header, data := split(t, b)
	if n := bytes.Count(header, []byte(old)); n != 1 {
		t.Fatalf("%s: %q occurs %d times in the header, want once", path, old, n)
	}
	nh := bytes.TrimRight(bytes.Replace(header, []byte(old), []byte(new), 1), " ")
	write(t, path, Reseal(assemble(nh, data)))
}

// Reseal returns the checkpoint file b with tensors_sha256 and
// header_sha256 recomputed, as a writer that ignores dqnflow's checks
// would write it.
func Reseal(b []byte) []byte {
	out := bytes.Clone(b)
	n := binary.LittleEndian.Uint64(out[:8])
	header, data := out[8:8+n], out[8+n:]
	sum := sha256.Sum256(data)
	copy(header[valueAt(header, checkpoint.MetaTensorsSHA256):], hex.EncodeToString(sum[:]))
	at := valueAt(header, checkpoint.MetaHeaderSHA256)
	copy(header[at:], strings.Repeat("0", 64))
	sum = sha256.Sum256(header)
	copy(header[at:], hex.EncodeToString(sum[:]))
	return out
}

// valueAt is the index of the value of metadata key in header.
func valueAt(header []byte, key string) int {
	k := []byte(`"` + key + `":"`)
	return bytes.Index(header, k) + len(k)
}

// assemble lays out a file from a header (padded with spaces to a
// multiple of 8 bytes, as Encode pads it) and a data section.
func assemble(header, data []byte) []byte {
	h := bytes.Clone(header)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), data...)
}

func split(t testing.TB, b []byte) (header, data []byte) {
	t.Helper()
	if len(b) < 8 {
		t.Fatal("not a checkpoint file")
	}
	n := binary.LittleEndian.Uint64(b[:8])
	return b[8 : 8+n], b[8+n:]
}

// offsets are the data_offsets of tensor name in header.
func offsets(t testing.TB, header []byte, name string) (int, int) {
	t.Helper()
	var h map[string]json.RawMessage
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatal(err)
	}
	var e struct {
		DataOffsets []int `json:"data_offsets"`
	}
	raw, ok := h[name]
	if !ok {
		t.Fatalf("no tensor %s in the header", name)
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e.DataOffsets[0], e.DataOffsets[1]
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
