package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/x448/float16"

	"github.com/dqnflow/dqnflow/bf16"
)

// ErrF16Overflow marks an f16 export refused because a finite weight would
// become ±Inf (its magnitude rounds past 65504, the largest finite binary16).
var ErrF16Overflow = errors.New("weight overflows float16")

// exportMeta lists the metadata keys an exported file keeps: what it takes
// to feed the network the same observations (config, instrument,
// normaliser) and where it came from.
var exportMeta = []string{MetaFormat, MetaRunID, MetaEpoch, MetaGlobalStep, MetaConfig, MetaInstrument, MetaNormalizer}

// ExportReport counts what an export did to the weights. Overflow,
// FlushedToZero and Subnormal describe the conversion to the target dtype:
// finite values that became ±Inf, non-zero values that became ±0, and values
// that became subnormal (reduced precision). NonFinite counts NaN and ±Inf
// already in the source, carried over unchanged.
type ExportReport struct {
	Tensors       int
	Values        int
	Overflow      int
	FlushedToZero int
	Subnormal     int
	NonFinite     int
}

// Export returns the inference weights of ck as a new checkpoint: the
// tensors whose name starts with prefix (the trainer's online network is
// "online."), renamed without it ("online.s1.weight" becomes "s1.weight"),
// in ck's order, converted to dtype:
//
//   - F32: an exact copy;
//   - BF16: bf16.FromFloat32, round to nearest even, NaN stays NaN;
//   - F16: float16.Fromfloat32 (IEEE binary16, round to nearest even).
//
// Source tensors must be F32 or BF16. The metadata keeps format version, run
// id, epoch, global step, config, instrument and normaliser, and adds
// MetaDType. An F16 export in which any finite value would overflow to Inf
// returns no checkpoint and an error wrapping ErrF16Overflow that names the
// first such tensor and value; the report still counts every overflow.
func Export(ck *Checkpoint, dtype DType, prefix string) (*Checkpoint, ExportReport, error) {
	var rep ExportReport
	if ck == nil {
		return nil, rep, errors.New("export: nil checkpoint")
	}
	if dtype != F32 && dtype != BF16 && dtype != F16 {
		return nil, rep, fmt.Errorf("export: dtype %q: want F32, BF16 or F16", dtype)
	}
	out := &Checkpoint{Meta: map[string]string{MetaDType: string(dtype)}}
	for _, k := range exportMeta {
		if v, ok := ck.Meta[k]; ok {
			out.Meta[k] = v
		}
	}
	var firstOverflow error
	for _, t := range ck.Tensors {
		if !strings.HasPrefix(t.Name, prefix) {
			continue
		}
		name := strings.TrimPrefix(t.Name, prefix)
		if name == "" {
			return nil, rep, fmt.Errorf("export: tensor %q: nothing is left of its name without the prefix %q", t.Name, prefix)
		}
		src, err := floats(t)
		if err != nil {
			return nil, rep, fmt.Errorf("export: %w", err)
		}
		o := Tensor{Name: name, DType: dtype, Shape: append([]int(nil), t.Shape...), Data: make([]byte, len(src)*dtype.Size())}
		for i, v := range src {
			if isNonFinite(v) {
				rep.NonFinite++
			}
			var bits uint16
			switch dtype {
			case F32:
				binary.LittleEndian.PutUint32(o.Data[4*i:], math.Float32bits(v))
				rep.count(v, classify32(v))
				continue
			case BF16:
				bits = uint16(bf16.FromFloat32(v))
				rep.count(v, classify16(bits, 7))
			case F16:
				bits = float16.Fromfloat32(v).Bits()
				c := classify16(bits, 10)
				rep.count(v, c)
				if c == classInf && !isNonFinite(v) && firstOverflow == nil {
					firstOverflow = fmt.Errorf("export: tensor %q (%q) element %d = %g overflows to Inf in f16, whose largest finite value is 65504: %w",
						name, t.Name, i, v, ErrF16Overflow)
				}
			}
			binary.LittleEndian.PutUint16(o.Data[2*i:], bits)
		}
		rep.Tensors++
		rep.Values += len(src)
		out.Tensors = append(out.Tensors, o)
	}
	if rep.Tensors == 0 {
		return nil, rep, fmt.Errorf("export: no tensor name starts with %q", prefix)
	}
	if firstOverflow != nil {
		return nil, rep, fmt.Errorf("%w (%d values overflow; export f32 or bf16 instead)", firstOverflow, rep.Overflow)
	}
	return out, rep, nil
}

// floats decodes an F32 or BF16 tensor to float32 after checking its layout.
func floats(t Tensor) ([]float32, error) {
	if err := checkLayout(t); err != nil {
		return nil, err
	}
	switch t.DType {
	case F32:
		v := make([]float32, len(t.Data)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
		return v, nil
	case BF16:
		v := make([]float32, len(t.Data)/2)
		for i := range v {
			v[i] = bf16.BF16(binary.LittleEndian.Uint16(t.Data[2*i:])).Float32()
		}
		return v, nil
	}
	return nil, fmt.Errorf("tensor %q is %s; only F32 and BF16 weights can be exported", t.Name, t.DType)
}

// class is what a converted value became.
type class int

const (
	classZero class = iota
	classSubnormal
	classNormal
	classInf
	classNaN
)

// count adds one source value v, converted to a value of class c, to rep.
func (rep *ExportReport) count(v float32, c class) {
	switch {
	case c == classInf && !isNonFinite(v):
		rep.Overflow++
	case c == classZero && v != 0:
		rep.FlushedToZero++
	case c == classSubnormal:
		rep.Subnormal++
	}
}

func isNonFinite(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }

// classify16 classifies a 16-bit float with mant mantissa bits (7 for
// bfloat16, 10 for binary16) and the remaining 15-mant exponent bits.
func classify16(bits uint16, mant uint) class {
	expMask := uint16(0x7fff) &^ (1<<mant - 1)
	m := bits & (1<<mant - 1)
	switch e := bits & expMask; {
	case e == expMask && m != 0:
		return classNaN
	case e == expMask:
		return classInf
	case e == 0 && m == 0:
		return classZero
	case e == 0:
		return classSubnormal
	}
	return classNormal
}

// classify32 classifies a float32 the same way.
func classify32(v float32) class {
	u := math.Float32bits(v)
	e, m := u&0x7f800000, u&0x007fffff
	switch {
	case e == 0x7f800000 && m != 0:
		return classNaN
	case e == 0x7f800000:
		return classInf
	case e == 0 && m == 0:
		return classZero
	case e == 0:
		return classSubnormal
	}
	return classNormal
}
