package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ErrCorrupt marks a checkpoint file that is not a complete, intact dqnflow
// safetensors file: truncated, a byte changed, a malformed header, or a hash
// that does not match. Errors wrap it, so callers test with errors.Is.
var ErrCorrupt = errors.New("corrupt checkpoint")

// MaxHeaderBytes bounds the JSON header, as the reference safetensors
// implementation does (100 MB), so a hostile length cannot make a reader
// allocate without limit.
const MaxHeaderBytes = 100_000_000

// hashPlaceholder stands for the header_sha256 value while the header hash
// is computed (see MetaHeaderSHA256).
const hashPlaceholder = "0000000000000000000000000000000000000000000000000000000000000000"

// Info describes one checkpoint file as written or read.
type Info struct {
	Path   string // file name as given; empty from Encode and Decode
	SHA256 string // hex SHA-256 of the whole file, as recorded in PostgreSQL
	Bytes  int64  // file size
	// Meta is the file's whole safetensors metadata, integrity keys included.
	Meta map[string]string
	// SignedBy is the ID of the key whose signature was made (Write) or
	// verified (Read, with Options.Keys); empty when none was.
	SignedBy string
}

// encoded is a checkpoint laid out as a safetensors file, ready to write.
type encoded struct {
	header []byte   // padded JSON header, hashes filled in
	data   [][]byte // tensor payloads in data-section order
	size   int64    // data section length
	meta   map[string]string
	// signedBy is the ID of the key that signed the header; "" unsigned.
	signedBy string
}

// Encode writes ck to w as an unsigned safetensors file and returns its
// Info (Path empty). It validates ck first and writes nothing when ck is
// invalid: every tensor needs a non-empty UTF-8 name other than
// "__metadata__", unique in ck, a known dtype, non-negative dimensions,
// exactly product(shape)×DType.Size() bytes of data and, if it is a
// floating-point tensor, finite values only (ErrNotFinite); metadata must
// be UTF-8. Write and Store.Write encode the same way, signed when their
// Options have a key.
//
// The header lists the tensors in ck's order. The data section packs them
// contiguously, widest element type first and otherwise in ck's order (as the
// reference implementation does), so every tensor starts at a multiple of its
// element size: PyTorch's safetensors loader cannot view misaligned bytes as
// float32 or int64. The metadata gains tensors_sha256 and header_sha256
// (replacing any such keys in ck.Meta); a signature in ck.Meta is dropped.
func Encode(w io.Writer, ck *Checkpoint) (Info, error) {
	e, err := encode(ck, Options{})
	if err != nil {
		return Info{}, err
	}
	return e.writeTo(w)
}

// encode lays ck out as Encode describes, signed with opt.Keys when set.
func encode(ck *Checkpoint, opt Options) (*encoded, error) {
	if ck == nil {
		return nil, errors.New("encode checkpoint: nil checkpoint")
	}
	seen := make(map[string]bool, len(ck.Tensors))
	for i, t := range ck.Tensors {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("encode checkpoint: tensor %d has an empty name", i)
		case t.Name == "__metadata__":
			return nil, fmt.Errorf("encode checkpoint: tensor %d: the name %q is reserved by safetensors", i, t.Name)
		case !utf8.ValidString(t.Name):
			return nil, fmt.Errorf("encode checkpoint: tensor %d: name %q is not valid UTF-8", i, t.Name)
		case seen[t.Name]:
			return nil, fmt.Errorf("encode checkpoint: tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if err := checkLayout(t); err != nil {
			return nil, fmt.Errorf("encode checkpoint: %w", err)
		}
		if i, v := firstNonFinite(t.DType, t.Data); i >= 0 {
			return nil, fmt.Errorf("encode checkpoint: %s: %w", notFinite(t, i, v), ErrNotFinite)
		}
	}
	meta := make(map[string]string, len(ck.Meta)+2)
	for k, v := range ck.Meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("encode checkpoint: metadata %q: key and value must be valid UTF-8", k)
		}
		meta[k] = v
	}

	// Data section: stable sort by element width, widest first, so every
	// offset is a multiple of the element size (widths are 8, 4, 2, 1).
	order := make([]int, len(ck.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return ck.Tensors[order[a]].DType.Size() > ck.Tensors[order[b]].DType.Size()
	})
	begin := make([]int64, len(ck.Tensors))
	e := &encoded{data: make([][]byte, 0, len(order))}
	h := sha256.New()
	for _, i := range order {
		begin[i] = e.size
		e.size += int64(len(ck.Tensors[i].Data))
		e.data = append(e.data, ck.Tensors[i].Data)
		h.Write(ck.Tensors[i].Data)
	}
	meta[MetaTensorsSHA256] = hex.EncodeToString(h.Sum(nil))
	meta[MetaHeaderSHA256] = hashPlaceholder
	delete(meta, MetaSignature) // another writer's signature, or a stale one
	if opt.Keys != nil {
		meta[MetaSignature] = opt.Keys.placeholder()
	}

	var b bytes.Buffer
	b.WriteString(`{"__metadata__":{`)
	for j, k := range slices.Sorted(maps.Keys(meta)) {
		if j > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, k)
		b.WriteByte(':')
		writeJSONString(&b, meta[k])
	}
	b.WriteByte('}')
	for i, t := range ck.Tensors {
		b.WriteByte(',')
		writeJSONString(&b, t.Name)
		fmt.Fprintf(&b, `:{"dtype":"%s","shape":[`, t.DType)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, begin[i], begin[i]+int64(len(t.Data)))
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 { // pad with spaces so the data section is 8-byte aligned
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderBytes {
		return nil, fmt.Errorf("encode checkpoint: header of %d bytes exceeds the safetensors limit of %d", b.Len(), MaxHeaderBytes)
	}
	e.header = b.Bytes()
	if opt.Keys != nil { // over the header with both placeholders
		if err := opt.Keys.sign(e.header); err != nil {
			return nil, fmt.Errorf("encode checkpoint: %w", err)
		}
		at, _ := valueAt(e.header, MetaSignature, sigValueLen) // found by sign
		meta[MetaSignature] = string(e.header[at : at+sigValueLen])
		e.signedBy = opt.Keys.ID()
	}
	at, err := headerHashAt(e.header)
	if err != nil { // cannot happen: the key was written above
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	sum := sha256.Sum256(e.header) // over the header with the placeholder
	hex.Encode(e.header[at:at+64], sum[:])
	meta[MetaHeaderSHA256] = string(e.header[at : at+64])
	e.meta = meta
	return e, nil
}

// bytes is the length of the file e encodes.
func (e *encoded) bytes() int64 { return 8 + int64(len(e.header)) + e.size }

// writeTo writes the length prefix, the header and the data section to w,
// hashing everything written.
func (e *encoded) writeTo(w io.Writer) (Info, error) {
	h := sha256.New()
	mw := io.MultiWriter(w, h)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(e.header)))
	if _, err := mw.Write(prefix[:]); err != nil {
		return Info{}, err
	}
	if _, err := mw.Write(e.header); err != nil {
		return Info{}, err
	}
	for _, d := range e.data {
		if _, err := mw.Write(d); err != nil {
			return Info{}, err
		}
	}
	return Info{
		SHA256:   hex.EncodeToString(h.Sum(nil)),
		Bytes:    e.bytes(),
		Meta:     e.meta,
		SignedBy: e.signedBy,
	}, nil
}

// writeJSONString writes s as a JSON string without HTML escaping, so the
// header reads as plain text.
func writeJSONString(b *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes; the writer never fails
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}

// headerHashAt returns the index in header of the 64 hex digits of the
// header_sha256 value.
func headerHashAt(header []byte) (int, error) { return valueAt(header, MetaHeaderSHA256, 64) }

// valueAt returns the index in header of the n-byte string value of
// metadata key. The key followed by `":"` can only occur once outside
// JSON strings (inside them a quote is escaped, and a tensor name is
// followed by an object), and Decode rejects duplicate metadata keys.
func valueAt(header []byte, key string, n int) (int, error) {
	k := []byte(`"` + key + `":"`)
	i := bytes.Index(header, k)
	if i < 0 || bytes.Count(header, k) != 1 {
		return 0, fmt.Errorf("metadata has no single %s entry written as %s<%d characters>\"", key, k, n)
	}
	at := i + len(k)
	if at+n+1 > len(header) || header[at+n] != '"' {
		return 0, fmt.Errorf("metadata %s is not %d characters", key, n)
	}
	return at, nil
}

// checkLayout reports whether t's data length equals product(shape) times
// its element size, without overflow.
func checkLayout(t Tensor) error {
	size := t.DType.Size()
	if size == 0 {
		return fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	n, err := elements(t.Shape, len(t.Data)/size)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if n*size != len(t.Data) {
		return fmt.Errorf("tensor %q: shape %v of %s needs %d bytes, data has %d", t.Name, t.Shape, t.DType, n*size, len(t.Data))
	}
	return nil
}

// elements returns the product of shape, or an error when a dimension is
// negative or the product exceeds limit (checked before it can overflow).
func elements(shape []int, limit int) (int, error) {
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d == 0 {
			return 0, nil
		}
	}
	n := 1
	for _, d := range shape {
		if n > limit/d {
			return 0, fmt.Errorf("shape %v holds more elements than the data", shape)
		}
		n *= d
	}
	return n, nil
}
