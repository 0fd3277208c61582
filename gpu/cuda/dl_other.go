//go:build !linux

package cuda

import (
	"errors"
	"runtime"
)

var errNotLinux = errors.New("the CUDA binding supports Linux only, this is " + runtime.GOOS)

func dlopen(path string) (uintptr, error) { return 0, errNotLinux }

func dlsym(handle uintptr, name string) uintptr { return 0 }

func register(fptr any, addr uintptr) error { return errNotLinux }

func threadID() int { return -1 }
