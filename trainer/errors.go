package trainer

import "errors"

// ErrNonFinite is returned (wrapped, with the step and the quantity) when a
// loss, gradient norm or weight becomes NaN or Inf. Training never continues
// past it, and no retry can fix it.
var ErrNonFinite = errors.New("non-finite value in training")
