package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// byteOffset is how every ErrCorrupt message locates the damage.
var byteOffset = regexp.MustCompile(`: byte \d+: `)

// reseal returns b with the two integrity hashes of its header recomputed,
// when the header has room for them: mutated inputs then get past the hash
// check and reach the success path, so the fuzzer explores what the reader
// accepts, not only what it refuses. Inputs without room are returned as
// they are.
func reseal(b []byte) []byte {
	if len(b) < 8 {
		return b
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > uint64(len(b)-8) {
		return b
	}
	out := bytes.Clone(b)
	header, data := out[8:8+n], out[8+n:]
	if key := []byte(`"` + MetaTensorsSHA256 + `":"`); bytes.Count(header, key) == 1 {
		at := bytes.Index(header, key) + len(key)
		if at+64 <= len(header) {
			sum := sha256.Sum256(data)
			copy(header[at:], hex.EncodeToString(sum[:]))
		}
	}
	if at, err := headerHashAt(header); err == nil {
		copy(header[at:], hashPlaceholder)
		sum := sha256.Sum256(header)
		copy(header[at:], hex.EncodeToString(sum[:]))
	}
	return out
}

// FuzzDecodeAcceptsOnlyWhatItCanWriteBack feeds arbitrary files (resealed,
// see reseal) to the safetensors reader. It must never panic; a rejection
// wraps ErrCorrupt and names the byte offset; an accepted file's tensors
// fill their shapes exactly, and writing it back with Encode gives a file
// that decodes to the same metadata and tensors. Seeds:
// testdata/fuzz/FuzzDecodeAcceptsOnlyWhatItCanWriteBack and the f.Add calls.
func FuzzDecodeAcceptsOnlyWhatItCanWriteBack(f *testing.F) {
	valid := encodeBytes(f, tiny())
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add([]byte{})
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "))
	empty := &Checkpoint{Meta: map[string]string{}, Tensors: []Tensor{F32Tensor("e", []int{0, 3}, nil)}}
	f.Add(encodeBytes(f, empty))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b := reseal(raw)
		ck, info, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("rejection does not wrap ErrCorrupt: %v", err)
			}
			if !byteOffset.MatchString(err.Error()) {
				t.Fatalf("rejection does not name the byte offset: %v", err)
			}
			return
		}
		if info.Bytes != int64(len(b)) {
			t.Fatalf("Info.Bytes %d, file has %d", info.Bytes, len(b))
		}
		for _, tn := range ck.Tensors {
			if err := checkLayout(tn); err != nil {
				t.Fatalf("accepted tensor %q does not fill its shape: %v", tn.Name, err)
			}
		}
		var w bytes.Buffer
		if _, err := Encode(&w, ck); err != nil {
			t.Fatalf("an accepted checkpoint cannot be written back: %v", err)
		}
		again, _, err := Decode(w.Bytes())
		if err != nil {
			t.Fatalf("the written-back checkpoint is refused: %v", err)
		}
		if !reflect.DeepEqual(again.Meta, ck.Meta) {
			t.Fatalf("metadata changed through Encode: %v, then %v", ck.Meta, again.Meta)
		}
		if len(again.Tensors) != len(ck.Tensors) {
			t.Fatalf("%d tensors, %d after Encode", len(ck.Tensors), len(again.Tensors))
		}
		for i, tn := range ck.Tensors {
			g := again.Tensors[i]
			if g.Name != tn.Name || g.DType != tn.DType || !reflect.DeepEqual(g.Shape, tn.Shape) || !bytes.Equal(g.Data, tn.Data) {
				t.Fatalf("tensor %d changed through Encode: %s %s%v, then %s %s%v", i, tn.Name, tn.DType, tn.Shape, g.Name, g.DType, g.Shape)
			}
		}
	})
}

// FuzzVerifyDetectsEveryChange damages a valid checkpoint file (one byte
// changed, the end cut off, bytes appended, in any combination) and checks
// that verify (Read) refuses every file that differs from the original, with an
// error that wraps ErrCorrupt and names the file, and accepts the original.
// Seeds: testdata/fuzz/FuzzVerifyDetectsEveryChange and the f.Add calls.
func FuzzVerifyDetectsEveryChange(f *testing.F) {
	ck := tiny()
	ck.Meta[MetaConfig] = `{"epochs":3}`
	valid := encodeBytes(f, ck)
	f.Add(uint32(0), byte(0), uint32(len(valid)), []byte(nil))
	f.Add(uint32(0), byte(1), uint32(len(valid)), []byte(nil))
	f.Add(uint32(len(valid)-1), byte(0x80), uint32(len(valid)), []byte(nil))
	f.Add(uint32(20), byte(0x20), uint32(len(valid)), []byte(nil))
	f.Add(uint32(0), byte(0), uint32(len(valid)-1), []byte(nil))
	f.Add(uint32(0), byte(0), uint32(len(valid)), []byte{0})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, at uint32, xor byte, keep uint32, extra []byte) {
		b := bytes.Clone(valid)
		if len(b) > 0 {
			b[int(at)%len(b)] ^= xor
		}
		if int(keep) < len(b) {
			b = b[:keep]
		}
		b = append(b, extra...)
		path := filepath.Join(dir, "ck.safetensors")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		info, err := verify(path)
		if bytes.Equal(b, valid) {
			if err != nil {
				t.Fatalf("the undamaged file is refused: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("a damaged file passed Read (sha256 %s; byte %d ^ %#x, cut to %d, %d appended)", info.SHA256, at, xor, keep, len(extra))
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("refusal does not wrap ErrCorrupt and name %s: %v", path, err)
		}
	})
}
