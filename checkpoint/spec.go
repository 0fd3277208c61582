package checkpoint

import (
	"fmt"
	"slices"
)

// Spec is one tensor that a reader requires of a checkpoint: its name, its
// exact shape and the dtypes it accepts. A model contract (trainer/model)
// is a list of them; this package knows tensors, not models.
type Spec struct {
	Name   string
	Shape  []int
	DTypes []DType
}

// Require reports the first tensor of specs that ck lacks or holds in a
// way the spec does not accept: missing (wraps ErrMissingTensor), more
// than once, of another dtype or shape, or with a byte length that does
// not match (wrap ErrTensorMismatch). The error names the tensor, so that
// with the file's name prefixed by the caller it says exactly what is
// wrong where. Tensors that no spec names are allowed.
func (ck *Checkpoint) Require(specs []Spec) error {
	if ck == nil {
		return fmt.Errorf("checkpoint tensors: nil checkpoint: %w", ErrMissingTensor)
	}
	count := make(map[string]int, len(ck.Tensors))
	for _, t := range ck.Tensors {
		count[t.Name]++
	}
	for _, sp := range specs {
		switch count[sp.Name] {
		case 0:
			return fmt.Errorf("checkpoint tensor %s: missing (%w)", sp.Name, ErrMissingTensor)
		case 1:
		default:
			return fmt.Errorf("checkpoint tensor %s: appears more than once (%d times) (%w)", sp.Name, count[sp.Name], ErrTensorMismatch)
		}
		t, _ := ck.Find(sp.Name)
		if !slices.Contains(sp.DTypes, t.DType) {
			return fmt.Errorf("checkpoint tensor %s: dtype %s, want %s (%w)", sp.Name, t.DType, dtypeList(sp.DTypes), ErrTensorMismatch)
		}
		if !slices.Equal(t.Shape, sp.Shape) {
			return fmt.Errorf("checkpoint tensor %s: shape %v, want %v: does the model config match? (%w)", sp.Name, t.Shape, sp.Shape, ErrTensorMismatch)
		}
		if checkLayout(t) != nil {
			return fmt.Errorf("checkpoint tensor %s: %d bytes of data, want %d %s values for shape %v (%w)", sp.Name, len(t.Data), shapeSize(t.Shape), t.DType, t.Shape, ErrTensorMismatch)
		}
	}
	return nil
}

// dtypeList writes dtypes as "F32" or "F32 or BF16".
func dtypeList(dtypes []DType) string {
	s := ""
	for i, d := range dtypes {
		switch {
		case i == 0:
		case i == len(dtypes)-1:
			s += " or "
		default:
			s += ", "
		}
		s += string(d)
	}
	return s
}

// shapeSize is the number of elements of shape, for messages.
func shapeSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
