//go:build linux

package cuda

import (
	"fmt"
	"syscall"

	"github.com/ebitengine/purego"
)

// dlopen opens a shared library with RTLD_NOW|RTLD_LOCAL.
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// dlsym returns the address of name in the library, or 0.
func dlsym(handle uintptr, name string) uintptr {
	addr, err := purego.Dlsym(handle, name)
	if err != nil {
		return 0
	}
	return addr
}

// register makes *fptr call the C function at addr. purego panics on a Go
// function type it cannot call; that is turned into an error here, so that a
// wrong binding is a clear error on the GPU host rather than a crash.
func register(fptr any, addr uintptr) (err error) {
	if addr == 0 {
		return fmt.Errorf("nil function address")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("purego cannot bind %T: %v", fptr, r)
		}
	}()
	purego.RegisterFunc(fptr, addr)
	return nil
}

// threadID identifies the calling OS thread; the device goroutine is locked
// to its thread, so a matching id means "running on the device thread".
func threadID() int { return syscall.Gettid() }
