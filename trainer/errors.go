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
