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

// ErrOverflow marks an export refused because a finite weight would
// become ±Inf in the target dtype: its magnitude rounds past 65504, the
// largest finite binary16, or past 3.3895314e38, the largest finite
// bfloat16.
var ErrOverflow = errors.New("weight overflows the export dtype")

// exportMeta lists the metadata keys an exported file keeps: what it takes
// to feed the network the same observations (config, instrument,
// normaliser) and where it came from.
var exportMeta = []string{MetaFormat, MetaRunID, MetaEpoch, MetaGlobalStep, MetaConfig, MetaInstrument, MetaNormalizer}

// ExportReport counts what an export did to the weights: Overflow,
// FlushedToZero and Subnormal describe the conversion to the target dtype
// (finite values that would become ±Inf, which refuses the export,
// non-zero values that became ±0, and values that became subnormal, with
// reduced precision).
type ExportReport struct {
	Tensors       int
	Values        int
	Overflow      int
	FlushedToZero int
	Subnormal     int
}

// Export returns the inference weights of ck as a new checkpoint: exactly
// the tensors of want (a model contract, such as the online network's
// blocks, each named with prefix: "online.s1.weight"), in want's order,
// renamed without prefix ("s1.weight") and converted to dtype:
//
//   - F32: an exact copy;
//   - BF16: bf16.FromFloat32, round to nearest even;
//   - F16: float16.Fromfloat32 (IEEE binary16, round to nearest even).
//
// Every tensor of want must be in ck with one of its dtypes, which must be
// F32 or BF16, and its shape (ck.Require); every value must be finite
// (ErrNotFinite) and stay finite in dtype (ErrOverflow, naming the first
// such tensor and value; the report still counts every overflow). On any
// error no checkpoint is returned, so an export never writes a file
// with a tensor missing or a NaN or Inf in it. The metadata keeps format
// version, run id, epoch, global step, config, instrument and normaliser,
// and adds MetaDType.
func Export(ck *Checkpoint, dtype DType, prefix string, want []Spec) (*Checkpoint, ExportReport, error) {
	var rep ExportReport
	if ck == nil {
		return nil, rep, errors.New("export: nil checkpoint")
	}
	if dtype != F32 && dtype != BF16 && dtype != F16 {
		return nil, rep, fmt.Errorf("export: dtype %q: want F32, BF16 or F16", dtype)
	}
	if len(want) == 0 {
		return nil, rep, errors.New("export: no tensors asked for")
	}
	if err := ck.Require(want); err != nil {
		return nil, rep, fmt.Errorf("export: %w", err)
	}
	out := &Checkpoint{Meta: map[string]string{MetaDType: string(dtype)}}
	for _, k := range exportMeta {
		if v, ok := ck.Meta[k]; ok {
			out.Meta[k] = v
		}
	}
	var firstOverflow error
	for _, sp := range want {
		t, _ := ck.Find(sp.Name)
		name, ok := strings.CutPrefix(t.Name, prefix)
		if !ok || name == "" {
			return nil, rep, fmt.Errorf("export: tensor %q: its name does not start with %q or has nothing after it", t.Name, prefix)
		}
		src, err := floats(t)
		if err != nil {
			return nil, rep, fmt.Errorf("export: %w", err)
		}
		o := Tensor{Name: name, DType: dtype, Shape: append([]int(nil), t.Shape...), Data: make([]byte, len(src)*dtype.Size())}
		for i, v := range src {
			if isNonFinite(v) {
				return nil, rep, fmt.Errorf("export: %s: %w", notFinite(t, i, float64(v)), ErrNotFinite)
			}
			var (
				bits uint16
				c    class
			)
			switch dtype {
			case F32:
				binary.LittleEndian.PutUint32(o.Data[4*i:], math.Float32bits(v))
				rep.count(v, classify32(v))
				continue
			case BF16:
				bits = uint16(bf16.FromFloat32(v))
				c = classify16(bits, 7)
			case F16:
				bits = float16.Fromfloat32(v).Bits()
				c = classify16(bits, 10)
			}
			rep.count(v, c)
			if c == classInf && firstOverflow == nil {
				firstOverflow = fmt.Errorf("export: tensor %q (%q) element %s = %g overflows to Inf in %s, whose largest finite value is %s: %w",
					name, t.Name, elementIndex(t.Shape, i), v, dtype, largest[dtype], ErrOverflow)
			}
			binary.LittleEndian.PutUint16(o.Data[2*i:], bits)
		}
		rep.Tensors++
		rep.Values += len(src)
		out.Tensors = append(out.Tensors, o)
	}
	if firstOverflow != nil {
		alt := "f32 or bf16"
		if dtype == BF16 {
			alt = "f32"
		}
		return nil, rep, fmt.Errorf("%w (%d values overflow; export %s instead)", firstOverflow, rep.Overflow, alt)
	}
	return out, rep, nil
}

// largest is the largest finite value of each 16-bit export dtype.
var largest = map[DType]string{F16: "65504", BF16: "3.3895314e+38"}

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

// count adds one finite source value v, converted to a value of class c,
// to rep.
func (rep *ExportReport) count(v float32, c class) {
	switch {
	case c == classInf:
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
