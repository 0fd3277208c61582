package trainer

import "errors"

// ErrNonFinite is returned (wrapped, with the step and the quantity) when a
// loss, gradient norm or weight becomes NaN or Inf. Training never continues
// past it, and no retry can fix it.
var ErrNonFinite = errors.New("non-finite value in training")

// ErrUnsupported is wrapped by the error of a backend asked for what it
// cannot run: a device it does not drive or a precision mode it lacks.
// Nothing falls back silently to another device or mode; a worker of this
// backend can never run the config, so no retry helps.
var ErrUnsupported = errors.New("not supported by this backend")

// ErrDevice is wrapped by the error of a backend whose device failed (a
// lost or faulted GPU, an uncorrectable memory error): the trainer's state
// on it is gone and the device must not be trusted with another run. The
// worker stops taking runs and the run moves to another worker, from its
// last checkpoint.
var ErrDevice = errors.New("device failed")
