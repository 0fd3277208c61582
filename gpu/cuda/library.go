package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// libSpec says where a shared library may be.
type libSpec struct {
	envVar  string   // a path that, when set, is the only one tried
	sonames []string // tried through the dynamic loader's search path, in order
	dirs    []string // folders (globs allowed) searched for each soname, in order
	hint    string   // what to do, appended to the error
}

// library is an opened shared library.
type library struct {
	path   string
	handle uintptr
}

// candidates returns the names and paths spec tries, in order: only the
// environment variable's path when it is set, else each soname through the
// dynamic loader, then each soname in each folder that exists.
func (spec libSpec) candidates(getenv func(string) string) []string {
	if p := getenv(spec.envVar); p != "" {
		return []string{p}
	}
	out := slices.Clone(spec.sonames)
	for _, pattern := range spec.dirs {
		dirs, err := filepath.Glob(pattern)
		if err != nil {
			continue // a malformed pattern is our own constant; skip rather than fail
		}
		// Newest first for versioned folders such as /usr/local/cuda-12.8.
		slices.Sort(dirs)
		slices.Reverse(dirs)
		for _, dir := range dirs {
			for _, so := range spec.sonames {
				p := filepath.Join(dir, so)
				if _, err := os.Stat(p); err == nil && !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// open opens the first candidate that loads. The error wraps sentinel and
// names everything tried, the first loader message and what to do.
func (spec libSpec) open(sentinel error) (*library, error) {
	tried := spec.candidates(os.Getenv)
	var errs []string
	for _, p := range tried {
		h, err := dlopen(p)
		if err == nil {
			return &library{path: p, handle: h}, nil
		}
		errs = append(errs, err.Error())
	}
	env := spec.envVar + " is unset"
	if v := os.Getenv(spec.envVar); v != "" {
		env = spec.envVar + "=" + v
	}
	first := "nothing to try"
	if len(errs) > 0 {
		first = errs[0]
	}
	return nil, fmt.Errorf("%w: tried %s (%s; also searched %s): %s; %s",
		sentinel, strings.Join(tried, ", "), env, strings.Join(spec.dirs, ", "), first, spec.hint)
}

// loaded is the API of a shared library, opened once per process, on
// first use; a failed attempt is not remembered, so a later call tries
// again.
type loaded[A any] struct {
	mu  sync.Mutex
	api *A
}

// load returns the API, the first time opening spec (its error wrapping
// sentinel) and binding the symbols that newAPI lists for the library;
// tooOld says what to do when a required one is missing.
func (l *loaded[A]) load(spec libSpec, sentinel error, tooOld string, newAPI func(*library) (*A, []symbol)) (*A, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.api != nil {
		return l.api, nil
	}
	lib, err := spec.open(sentinel)
	if err != nil {
		return nil, err
	}
	a, syms := newAPI(lib)
	if err := lib.bind(syms, tooOld); err != nil {
		return nil, err
	}
	l.api = a
	return a, nil
}

// symbol is one C function bound to a Go function variable.
type symbol struct {
	names    []string // alternatives, preferred first (e.g. a _v2 and its original)
	fptr     any      // pointer to a Go func variable
	optional bool     // a missing optional symbol leaves *fptr nil
}

// bind resolves and registers every symbol of lib.
func (lib *library) bind(syms []symbol, need string) error {
	var errs []error
	for _, s := range syms {
		var addr uintptr
		for _, n := range s.names {
			if addr = dlsym(lib.handle, n); addr != 0 {
				break
			}
		}
		if addr == 0 {
			if !s.optional {
				errs = append(errs, fmt.Errorf("%s lacks %s (%s)", lib.path, strings.Join(s.names, " and "), need))
			}
			continue
		}
		if err := register(s.fptr, addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", lib.path, s.names[0], err))
		}
	}
	return errors.Join(errs...)
}
