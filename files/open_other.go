//go:build !unix

package files

// openFlags adds nothing where O_NONBLOCK does not exist.
const openFlags = 0
