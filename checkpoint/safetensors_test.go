package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// tiny is the checkpoint of the golden test: three dtypes, listed narrowest
// first so that the data section must reorder them for alignment.
func tiny() *Checkpoint {
	return &Checkpoint{
		Meta: map[string]string{"run_id": "r1"},
		Tensors: []Tensor{
			U8Tensor("m", []int{3}, []byte{1, 2, 3}),
			F32Tensor("w", []int{2}, []float32{1, -2}),
			I64Tensor("n", nil, []int64{7}),
		},
	}
}

func encodeBytes(t testing.TB, ck *Checkpoint) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := Encode(&b, ck); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b.Bytes()
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestEncodeMatchesHandBuiltSafetensorsBytes builds the expected file from
// the safetensors specification by hand (8-byte little-endian header length,
// compact JSON header padded with spaces to a multiple of 8, data section
// with offsets relative to its start) and compares byte for byte.
func TestEncodeMatchesHandBuiltSafetensorsBytes(t *testing.T) {
	data := []byte{
		7, 0, 0, 0, 0, 0, 0, 0, // n: int64 7 (widest first, offset 0)
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, // w: float32 1, -2
		1, 2, 3, // m: uint8
	}
	zeros := strings.Repeat("0", 64)
	header := `{"__metadata__":{"header_sha256":"` + zeros + `","run_id":"r1","tensors_sha256":"` + hexSum(data) + `"},` +
		`"m":{"dtype":"U8","shape":[3],"data_offsets":[16,19]},` +
		`"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},` +
		`"n":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`
	for len(header)%8 != 0 {
		header += " "
	}
	header = strings.Replace(header, zeros, hexSum([]byte(header)), 1)
	want := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	want = append(want, header...)
	want = append(want, data...)

	got := encodeBytes(t, tiny())
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode bytes differ from the hand-built file\n got %q\nwant %q", got, want)
	}
	ck, info, err := Decode(got)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if info.SHA256 != hexSum(want) || info.Bytes != int64(len(want)) {
		t.Errorf("Decode info = %s/%d bytes, want %s/%d", info.SHA256, info.Bytes, hexSum(want), len(want))
	}
	if !reflect.DeepEqual(ck.Meta, map[string]string{"run_id": "r1"}) {
		t.Errorf("Decode meta = %v, want only run_id", ck.Meta)
	}
}

// mixed is a checkpoint with every dtype, odd lengths, an empty tensor, a
// scalar and metadata that needs JSON escaping.
func mixed() *Checkpoint {
	return &Checkpoint{
		Meta: map[string]string{
			MetaRunID:  "run-α",
			MetaConfig: `{"seed":1,"note":"a \"quoted\" <tag> & \\ back\nslash"}`,
			"empty":    "",
		},
		Tensors: []Tensor{
			U8Tensor("flags", []int{5}, []byte{0, 1, 0, 1, 1}),
			F32Tensor("online.s1.weight", []int{2, 3}, []float32{1, -2, 3.5, -math.MaxFloat32, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32}),
			I32Tensor("bars", []int{3}, []int32{-1, 0, 1 << 30}),
			{Name: "half", DType: F16, Shape: []int{1}, Data: []byte{0x00, 0x3c}},
			{Name: "brain", DType: BF16, Shape: []int{3}, Data: []byte{0x80, 0x3f, 0x00, 0xc0, 0x7f, 0x7f}},
			I64Tensor("step", nil, []int64{-42}),
			F64Tensor("equity", []int{1, 1}, []float64{100000.5}),
			F32Tensor("empty", []int{0, 4}, nil),
		},
	}
}

// TestDecodeInvertsEncode checks that decoding an encoded checkpoint gives
// the same tensors in the same order and the same metadata, and that
// encoding the result again gives the same bytes.
func TestDecodeInvertsEncode(t *testing.T) {
	in := mixed()
	b := encodeBytes(t, in)
	out, info, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(out.Meta, in.Meta) {
		t.Errorf("meta = %q, want %q", out.Meta, in.Meta)
	}
	if info.Meta[MetaTensorsSHA256] == "" || info.Meta[MetaHeaderSHA256] == "" {
		t.Errorf("Info.Meta lacks the integrity keys: %v", info.Meta)
	}
	if len(out.Tensors) != len(in.Tensors) {
		t.Fatalf("got %d tensors, want %d", len(out.Tensors), len(in.Tensors))
	}
	for i, w := range in.Tensors {
		g := out.Tensors[i]
		if g.Name != w.Name || g.DType != w.DType || len(g.Shape) != len(w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %d = %s %s %v %x, want %s %s %v %x", i, g.Name, g.DType, g.Shape, g.Data, w.Name, w.DType, w.Shape, w.Data)
		}
		for j := range w.Shape {
			if g.Shape[j] != w.Shape[j] {
				t.Errorf("tensor %s shape %v, want %v", w.Name, g.Shape, w.Shape)
			}
		}
	}
	if again := encodeBytes(t, out); !bytes.Equal(again, b) {
		t.Errorf("re-encoding a decoded checkpoint changed the bytes")
	}
}

// TestEncodeAlignsEveryTensor checks, with an independent JSON parse, that
// the data section has no gap and every tensor starts at a file offset that
// is a multiple of its element size (PyTorch needs this to view the bytes).
func TestEncodeAlignsEveryTensor(t *testing.T) {
	b := encodeBytes(t, mixed())
	n := binary.LittleEndian.Uint64(b)
	if n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatalf("header is not JSON: %v", err)
	}
	total := 0
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType       DType `json:"dtype"`
			DataOffsets []int `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("tensor %s: %v", name, err)
		}
		if (8+int(n)+e.DataOffsets[0])%e.DType.Size() != 0 {
			t.Errorf("tensor %s (%s) starts at file offset %d", name, e.DType, 8+int(n)+e.DataOffsets[0])
		}
		total += e.DataOffsets[1] - e.DataOffsets[0]
	}
	if total != len(b)-8-int(n) {
		t.Errorf("tensors cover %d bytes of a %d-byte data section", total, len(b)-8-int(n))
	}
}

// TestDecodeDetectsEverySingleByteChange changes each byte of a small file
// to each of its 255 other values; every result must be rejected as
// corrupt, never accepted and never a panic.
func TestDecodeDetectsEverySingleByteChange(t *testing.T) {
	b := encodeBytes(t, tiny())
	c := make([]byte, len(b))
	for pos := range b {
		for x := 1; x < 256; x++ {
			copy(c, b)
			c[pos] ^= byte(x)
			if _, _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d xor %#02x: Decode error = %v, want ErrCorrupt", pos, x, err)
			}
		}
	}
}

// TestDecodeDetectsEveryTruncationAndExtension checks every proper prefix of
// a file and the file with bytes appended.
func TestDecodeDetectsEveryTruncationAndExtension(t *testing.T) {
	b := encodeBytes(t, mixed())
	for n := 0; n < len(b); n++ {
		if _, _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: error = %v, want ErrCorrupt", n, len(b), err)
		}
	}
	for _, tail := range []string{"\x00", " ", "garbage"} {
		if _, _, err := Decode(append(bytes.Clone(b), tail...)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("with %q appended: error = %v, want ErrCorrupt", tail, err)
		}
	}
}

// file builds a raw safetensors file from a header and data, with no
// integrity keys unless the header has them.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// TestDecodeRejectsHostileHeaders feeds headers a careless or malicious
// writer could produce; each must give ErrCorrupt with the reason named.
func TestDecodeRejectsHostileHeaders(t *testing.T) {
	f32 := func(offsets, shape string) string {
		return `{"t":{"dtype":"F32","shape":` + shape + `,"data_offsets":` + offsets + `}}`
	}
	withLen := func(n uint64, rest string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
	}
	eight := make([]byte, 8)
	cases := []struct {
		name, reason string
		file         []byte
	}{
		{"empty file", "fewer than the 8-byte", nil},
		{"huge header length", "exceeds the limit", withLen(math.MaxUint64, "{}")},
		{"header length just over the limit", "exceeds the limit", withLen(MaxHeaderBytes+1, "{}")},
		{"header length past the end", "runs past the end", withLen(100, "{}")},
		{"empty header", "does not start with '{'", withLen(0, "")},
		{"array header", "does not start with '{'", file(`[]`, nil)},
		{"invalid UTF-8", "not valid UTF-8", file("{\"\xff\":1}", nil)},
		{"unterminated JSON", "not valid JSON", file(`{"t":`, nil)},
		{"number as key value", "where", file(`{"t":1}`, nil)},
		{"non-string metadata", "string value", file(`{"__metadata__":{"k":1}}`, nil)},
		{"duplicate metadata key", `"k" appears twice`, file(`{"__metadata__":{"k":"a","k":"b"}}`, nil)},
		{"duplicate tensor", `"t" appears twice`, file(`{"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"t":{}}`, nil)},
		{"duplicate field", `"shape" appears twice`, file(`{"t":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}`, []byte{1})},
		{"missing dtype", "has no dtype", file(`{"t":{"shape":[1],"data_offsets":[0,4]}}`, eight[:4])},
		{"unknown dtype", "unsupported dtype", file(`{"t":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`, eight[:1])},
		{"negative offset", "0 <= begin <= end", file(f32(`[-4,0]`, `[1]`), eight[:4])},
		{"reversed offsets", "0 <= begin <= end", file(f32(`[4,0]`, `[1]`), eight[:4])},
		{"three offsets", "0 <= begin <= end", file(f32(`[0,4,8]`, `[1]`), eight[:4])},
		{"fractional offset", "not a 64-bit integer", file(f32(`[0,4.5]`, `[1]`), eight[:4])},
		{"offset beyond int64", "not a 64-bit integer", file(f32(`[0,1e30]`, `[1]`), eight[:4])},
		{"offset as string", "not a number", file(f32(`[0,"4"]`, `[1]`), eight[:4])},
		{"offsets past the data", "run past", file(f32(`[0,8]`, `[2]`), eight[:4])},
		{"shape does not match bytes", "does not fill", file(f32(`[0,8]`, `[3]`), eight)},
		{"negative dimension", "out of range", file(f32(`[0,4]`, `[-1]`), eight[:4])},
		{"overflowing shape", "does not fill", file(f32(`[0,4]`, `[4294967296,4294967296,4294967296]`), eight[:4])},
		{"gap before the tensor", "gap", file(f32(`[4,8]`, `[1]`), eight)},
		{"overlapping tensors", "overlaps", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight)},
		{"data beyond the tensors", "cover 4 bytes of the 8-byte", file(f32(`[0,4]`, `[1]`), eight)},
		{"garbage after the object", "after its JSON object", file(`{}x      `, nil)},
		{"no integrity keys", "no tensors_sha256", file(f32(`[0,4]`, `[1]`), eight[:4])},
		{"deeply nested unknown field", `field "x"`, file(`{"t":{"x":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`}}`, nil)},
		{"header hash missing", "header_sha256", file(`{"__metadata__":{"tensors_sha256":"`+hexSum(nil)+`"}}`, nil)},
		{"header hash wrong", "the header was changed", file(`{"__metadata__":{"header_sha256":"`+strings.Repeat("0", 64)+`","tensors_sha256":"`+hexSum(nil)+`"}}`, nil)},
	}
	for _, c := range cases {
		_, _, err := Decode(c.file)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: error = %v, want ErrCorrupt mentioning %q", c.name, err, c.reason)
		}
	}
}

// TestDecodeReportsTheBytePosition checks that a damaged header byte is
// reported near its offset in the file.
func TestDecodeReportsTheBytePosition(t *testing.T) {
	b := file(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x`, make([]byte, 4))
	_, _, err := Decode(b)
	if err == nil || !strings.Contains(err.Error(), "byte 63:") {
		t.Errorf("error = %v, want it to name byte 63 (the 'x')", err)
	}
}

// TestEncodeRejectsInvalidCheckpoints checks that Encode validates before
// writing: each case is an error naming the problem, and nothing is written.
func TestEncodeRejectsInvalidCheckpoints(t *testing.T) {
	ok := F32Tensor("ok", []int{1}, []float32{1})
	cases := []struct {
		name, reason string
		ck           *Checkpoint
	}{
		{"nil checkpoint", "nil checkpoint", nil},
		{"empty name", "empty name", &Checkpoint{Tensors: []Tensor{{DType: U8, Shape: []int{0}}}}},
		{"reserved name", "reserved", &Checkpoint{Tensors: []Tensor{U8Tensor("__metadata__", []int{0}, nil)}}},
		{"invalid UTF-8 name", "UTF-8", &Checkpoint{Tensors: []Tensor{U8Tensor("a\xff", []int{0}, nil)}}},
		{"duplicate name", `"ok" appears twice`, &Checkpoint{Tensors: []Tensor{ok, ok}}},
		{"unknown dtype", "unknown dtype", &Checkpoint{Tensors: []Tensor{{Name: "x", DType: "F8", Shape: []int{1}, Data: []byte{1}}}}},
		{"shape larger than data", `"short"`, &Checkpoint{Tensors: []Tensor{F32Tensor("short", []int{3}, []float32{1, 2})}}},
		{"shape smaller than data", "needs 4 bytes, data has 8", &Checkpoint{Tensors: []Tensor{F32Tensor("long", []int{1}, []float32{1, 2})}}},
		{"negative dimension", "negative", &Checkpoint{Tensors: []Tensor{F32Tensor("neg", []int{-1}, nil)}}},
		{"invalid UTF-8 metadata", "UTF-8", &Checkpoint{Meta: map[string]string{"k": "\xff"}}},
	}
	for _, c := range cases {
		var b bytes.Buffer
		_, err := Encode(&b, c.ck)
		if err == nil || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: error = %v, want one mentioning %q", c.name, err, c.reason)
		}
		if b.Len() != 0 {
			t.Errorf("%s: Encode wrote %d bytes before failing", c.name, b.Len())
		}
	}
}

// TestEncodeReplacesStaleIntegrityKeys checks that integrity keys carried in
// ck.Meta (say from a checkpoint read earlier) are recomputed, not copied.
func TestEncodeReplacesStaleIntegrityKeys(t *testing.T) {
	ck := tiny()
	ck.Meta[MetaTensorsSHA256] = "stale"
	ck.Meta[MetaHeaderSHA256] = "stale"
	if _, _, err := Decode(encodeBytes(t, ck)); err != nil {
		t.Fatalf("Decode of a checkpoint with stale integrity keys in Meta: %v", err)
	}
}
