package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// entry is one tensor of a parsed header.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	begin, end int64
	pos        int64 // file offset of the entry's name, for errors
}

// Decode parses a whole safetensors file written by Encode and checks it
// completely before returning anything: the header length against
// MaxHeaderBytes and the file size, the header as UTF-8 JSON with unique
// keys, string metadata, every tensor's dtype, shape and data_offsets (no
// gaps, no overlaps, nothing past the end, bytes equal to shape × dtype),
// both integrity hashes (MetaTensorsSHA256, MetaHeaderSHA256), and that
// every floating-point value is finite (ErrNotFinite). Any failure wraps
// ErrCorrupt and names the byte offset in the file and the reason. A
// signature is not checked: Read and Store.Read do that when their
// Options have a key. The returned tensors are in header order and share
// b's memory; the Checkpoint's Meta omits the integrity keys and the
// signature, which Info.Meta keeps.
func Decode(b []byte) (*Checkpoint, Info, error) {
	return decode(context.Background(), b, Options{})
}

// decode is Decode that also verifies the signature when opt has a key
// and stops with ctx's error when ctx ends.
func decode(ctx context.Context, b []byte, opt Options) (*Checkpoint, Info, error) {
	if len(b) < 8 {
		return nil, Info{}, corrupt(0, "file has %d bytes, fewer than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > MaxHeaderBytes {
		return nil, Info{}, corrupt(0, "header length %d exceeds the limit of %d bytes", n, MaxHeaderBytes)
	}
	if n > uint64(len(b)-8) {
		return nil, Info{}, corrupt(0, "header length %d runs past the end of the %d-byte file (truncated?)", n, len(b))
	}
	header, data := b[8:8+n], b[8+n:]
	dataStart := int64(8 + n)

	meta, entries, err := parseHeader(header)
	if err != nil {
		return nil, Info{}, err
	}
	if err := checkOffsets(entries, int64(len(data)), dataStart); err != nil {
		return nil, Info{}, err
	}
	if err := checkHashes(ctx, meta, header, data, dataStart); err != nil {
		return nil, Info{}, err
	}
	var signedBy string
	if opt.Keys != nil {
		if err := opt.Keys.verify(meta, header); err != nil {
			return nil, Info{}, err
		}
		signedBy = opt.Keys.ID()
	}
	if err := checkFinite(ctx, entries, data, dataStart); err != nil {
		return nil, Info{}, err
	}

	ck := &Checkpoint{Meta: make(map[string]string, len(meta)), Tensors: make([]Tensor, len(entries))}
	for k, v := range meta {
		if k != MetaTensorsSHA256 && k != MetaHeaderSHA256 && k != MetaSignature {
			ck.Meta[k] = v
		}
	}
	for i, e := range entries {
		ck.Tensors[i] = Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Data: data[e.begin:e.end:e.end]}
	}
	sum, err := sha256Of(ctx, b)
	if err != nil {
		return nil, Info{}, err
	}
	return ck, Info{SHA256: hex.EncodeToString(sum), Bytes: int64(len(b)), Meta: meta, SignedBy: signedBy}, nil
}

// corrupt returns an error wrapping ErrCorrupt at file offset pos.
func corrupt(pos int64, format string, args ...any) error {
	return fmt.Errorf("%w: byte %d: %s", ErrCorrupt, pos, fmt.Sprintf(format, args...))
}

// parseHeader reads the JSON header token by token, so that key order is
// kept, duplicate keys are caught and keys match exactly (encoding/json
// would match struct fields case-insensitively and keep the last duplicate).
func parseHeader(h []byte) (map[string]string, []entry, error) {
	if !utf8.Valid(h) {
		i := 0
		for i < len(h) {
			r, size := utf8.DecodeRune(h[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		return nil, nil, corrupt(8+int64(i), "header is not valid UTF-8")
	}
	if len(h) == 0 || h[0] != '{' {
		return nil, nil, corrupt(8, "header does not start with '{'")
	}
	p := &parser{dec: json.NewDecoder(bytes.NewReader(h))}
	p.dec.UseNumber()
	if err := p.delim('{'); err != nil {
		return nil, nil, err
	}
	var (
		meta    map[string]string
		entries []entry
		seen    = map[string]bool{}
	)
	for p.dec.More() {
		pos := p.pos()
		key, err := p.str("a tensor name")
		if err != nil {
			return nil, nil, err
		}
		if seen[key] {
			return nil, nil, corrupt(pos, "key %q appears twice in the header", key)
		}
		seen[key] = true
		if key == "__metadata__" {
			if meta, err = p.metadata(); err != nil {
				return nil, nil, err
			}
			continue
		}
		e, err := p.entry(key, pos)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if err := p.delim('}'); err != nil {
		return nil, nil, err
	}
	end := p.dec.InputOffset()
	for i := end; i < int64(len(h)); i++ {
		if c := h[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, nil, corrupt(8+i, "header has %q after its JSON object (padding must be spaces)", c)
		}
	}
	if meta == nil {
		meta = map[string]string{}
	}
	return meta, entries, nil
}

// parser wraps a json.Decoder with errors that carry file offsets.
type parser struct{ dec *json.Decoder }

func (p *parser) pos() int64 { return 8 + p.dec.InputOffset() }

func (p *parser) token(want string) (json.Token, error) {
	pos := p.pos()
	t, err := p.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			pos = 8 + se.Offset
		}
		return nil, corrupt(pos, "header is not valid JSON (want %s): %v", want, err)
	}
	return t, nil
}

func (p *parser) delim(d json.Delim) error {
	pos := p.pos()
	t, err := p.token(strconv.QuoteRune(rune(d)))
	if err != nil {
		return err
	}
	if t != d {
		return corrupt(pos, "header has %v where %q belongs", t, rune(d))
	}
	return nil
}

func (p *parser) str(what string) (string, error) {
	pos := p.pos()
	t, err := p.token(what)
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", corrupt(pos, "header has %v where %s (a string) belongs", t, what)
	}
	return s, nil
}

// metadata reads the "__metadata__" object: string keys to string values.
func (p *parser) metadata() (map[string]string, error) {
	if err := p.delim('{'); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for p.dec.More() {
		pos := p.pos()
		k, err := p.str("a metadata key")
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, corrupt(pos, "metadata key %q appears twice", k)
		}
		v, err := p.str(fmt.Sprintf("the string value of metadata %q", k))
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, p.delim('}')
}

// entry reads one tensor's {"dtype","shape","data_offsets"} object. Other
// keys are skipped, as the reference implementation does.
func (p *parser) entry(name string, pos int64) (entry, error) {
	e := entry{name: name, pos: pos}
	if err := p.delim('{'); err != nil {
		return e, err
	}
	var offsets []int64
	seen := map[string]bool{}
	for p.dec.More() {
		kpos := p.pos()
		k, err := p.str(fmt.Sprintf("a field of tensor %q", name))
		if err != nil {
			return e, err
		}
		if seen[k] {
			return e, corrupt(kpos, "tensor %q: field %q appears twice", name, k)
		}
		seen[k] = true
		switch k {
		case "dtype":
			s, err := p.str(fmt.Sprintf("the dtype of tensor %q", name))
			if err != nil {
				return e, err
			}
			e.dtype = DType(s)
			if e.dtype.Size() == 0 {
				return e, corrupt(kpos, "tensor %q: unsupported dtype %q (want F64, F32, BF16, F16, I64, I32 or U8)", name, s)
			}
		case "shape":
			dims, err := p.ints(fmt.Sprintf("the shape of tensor %q", name))
			if err != nil {
				return e, err
			}
			e.shape = make([]int, len(dims))
			for i, d := range dims {
				if d < 0 || d > int64(math.MaxInt) {
					return e, corrupt(kpos, "tensor %q: shape %v has dimension %d out of range", name, dims, d)
				}
				e.shape[i] = int(d)
			}
		case "data_offsets":
			if offsets, err = p.ints(fmt.Sprintf("the data_offsets of tensor %q", name)); err != nil {
				return e, err
			}
			if len(offsets) != 2 || offsets[0] < 0 || offsets[1] < offsets[0] {
				return e, corrupt(kpos, "tensor %q: data_offsets %v is not [begin, end] with 0 <= begin <= end", name, offsets)
			}
			e.begin, e.end = offsets[0], offsets[1]
		default:
			var skip json.RawMessage
			if err := p.dec.Decode(&skip); err != nil {
				return e, corrupt(kpos, "tensor %q: field %q: %v", name, k, err)
			}
		}
	}
	if err := p.delim('}'); err != nil {
		return e, err
	}
	for _, f := range []string{"dtype", "shape", "data_offsets"} {
		if !seen[f] {
			return e, corrupt(pos, "tensor %q has no %s", name, f)
		}
	}
	return e, nil
}

// ints reads a JSON array of integers.
func (p *parser) ints(what string) ([]int64, error) {
	if err := p.delim('['); err != nil {
		return nil, err
	}
	var out []int64
	for p.dec.More() {
		pos := p.pos()
		t, err := p.token(what)
		if err != nil {
			return nil, err
		}
		num, ok := t.(json.Number)
		if !ok {
			return nil, corrupt(pos, "%s: %v is not a number", what, t)
		}
		v, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			return nil, corrupt(pos, "%s: %s is not a 64-bit integer", what, num)
		}
		out = append(out, v)
	}
	return out, p.delim(']')
}

// checkOffsets checks that the tensors tile the data section exactly, in
// some order, and that each one's byte range matches its shape and dtype.
func checkOffsets(entries []entry, dataLen, dataStart int64) error {
	for _, e := range entries {
		size := int64(e.dtype.Size())
		if e.end > dataLen {
			return corrupt(e.pos, "tensor %q: data_offsets [%d, %d] run past the %d-byte data section (truncated?)", e.name, e.begin, e.end, dataLen)
		}
		n, err := elements(e.shape, int((e.end-e.begin)/size))
		if err != nil || int64(n)*size != e.end-e.begin {
			return corrupt(e.pos, "tensor %q: shape %v of %s does not fill data_offsets [%d, %d] (%d bytes)", e.name, e.shape, e.dtype, e.begin, e.end, e.end-e.begin)
		}
	}
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { // empty tensors first at a tie
		ea, eb := entries[order[a]], entries[order[b]]
		return ea.begin < eb.begin || ea.begin == eb.begin && ea.end < eb.end
	})
	var next int64
	for _, i := range order {
		e := entries[i]
		switch {
		case e.begin > next:
			return corrupt(e.pos, "tensor %q starts at data offset %d, leaving a gap after offset %d", e.name, e.begin, next)
		case e.begin < next:
			return corrupt(e.pos, "tensor %q at data offsets [%d, %d] overlaps the tensor before it, which ends at %d", e.name, e.begin, e.end, next)
		}
		next = e.end
	}
	if next != dataLen {
		return corrupt(dataStart+next, "tensors cover %d bytes of the %d-byte data section", next, dataLen)
	}
	return nil
}

// checkHashes verifies MetaTensorsSHA256 against the data section and
// MetaHeaderSHA256 against the header (with its own digits zeroed).
func checkHashes(ctx context.Context, meta map[string]string, header, data []byte, dataStart int64) error {
	want, ok := meta[MetaTensorsSHA256]
	if !ok {
		return corrupt(8, "metadata has no %s: not written by dqnflow, or damaged", MetaTensorsSHA256)
	}
	if _, ok := meta[MetaHeaderSHA256]; !ok {
		return corrupt(8, "metadata has no %s: not written by dqnflow, or damaged", MetaHeaderSHA256)
	}
	at, err := headerHashAt(header)
	if err != nil {
		return corrupt(8, "%v", err)
	}
	withZeros := bytes.Clone(header)
	copy(withZeros[at:], hashPlaceholder)
	sum := sha256.Sum256(withZeros)
	if got := hex.EncodeToString(sum[:]); got != string(header[at:at+64]) || got != meta[MetaHeaderSHA256] {
		return corrupt(8, "header sha256 is %s, its %s says %q: the header was changed", got, MetaHeaderSHA256, meta[MetaHeaderSHA256])
	}
	dsum, err := sha256Of(ctx, data)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(dsum); got != want {
		return corrupt(dataStart, "data section sha256 is %s, %s says %q: tensor data was changed", got, MetaTensorsSHA256, want)
	}
	return nil
}
