//go:build unix

package files

import "syscall"

// openFlags makes an open return at once: a named pipe swapped in after the
// type check must not block the open waiting for a writer.
const openFlags = syscall.O_NONBLOCK
