package metadata

import "errors"

var (
	// ErrNotFound is wrapped by errors about a run or row that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is wrapped by errors about input that no retry can fix.
	ErrInvalid = errors.New("invalid input")
)
