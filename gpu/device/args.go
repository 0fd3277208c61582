package device

import (
	"math"
	"unsafe"

	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// Words builds the bytes of a C struct of 64-bit fields (pointers, long
// long, double, or two 32-bit fields packed low-first) that a kernel reads
// from device memory. Every argument struct in kernels/*.cu is written as
// such words, so no padding rule can differ between Go and C.
type Words []uint64

func (w *Words) Ptr(p cuda.DevPtr) *Words { *w = append(*w, uint64(p)); return w }
func (w *Words) I64(v int64) *Words       { *w = append(*w, uint64(v)); return w }
func (w *Words) F64(v float64) *Words     { *w = append(*w, math.Float64bits(v)); return w }

// F32x2 packs two float fields that follow each other.
func (w *Words) F32x2(a, b float32) *Words {
	*w = append(*w, uint64(math.Float32bits(a))|uint64(math.Float32bits(b))<<32)
	return w
}

// F32i32 packs a float field followed by an int field.
func (w *Words) F32i32(a float32, b int32) *Words {
	*w = append(*w, uint64(math.Float32bits(a))|uint64(uint32(b))<<32)
	return w
}

// I32x2 packs two int fields.
func (w *Words) I32x2(a, b int32) *Words {
	*w = append(*w, uint64(uint32(a))|uint64(uint32(b))<<32)
	return w
}

// Launch is one kernel launch with its arguments resolved once.
type Launch struct {
	Name   string
	F      cuda.Function
	Grid   cuda.Dim3
	Block  cuda.Dim3
	Shared int
	Args   []any
}

func (l *Launch) Run(c *cuda.Ctx, s cuda.Stream) error {
	return c.Launch(l.F, l.Grid, l.Block, l.Shared, s, l.Args...)
}

// RunIn queues l on s as a programmatic dependent of the kernel before it
// when dependent is set (cuda.Ctx.LaunchDependent; every kernel of
// kernels/*.cu starts with pdlEnter), as an ordinary launch otherwise.
func (l *Launch) RunIn(c *cuda.Ctx, s cuda.Stream, dependent bool) error {
	if dependent {
		return c.LaunchDependent(l.F, l.Grid, l.Block, l.Shared, s, l.Args...)
	}
	return l.Run(c, s)
}

func Dim(x int) cuda.Dim3        { return cuda.Dim3{X: uint32(x), Y: 1, Z: 1} }
func Dim2(x, y int) cuda.Dim3    { return cuda.Dim3{X: uint32(x), Y: uint32(y), Z: 1} }
func dim3(x, y, z int) cuda.Dim3 { return cuda.Dim3{X: uint32(x), Y: uint32(y), Z: uint32(z)} }
func CeilDiv(a, b int) int       { return (a + b - 1) / b }

// PtrOf is the address of the first element of a non-empty slice.
func PtrOf[T any](s []T) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
