package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Roots are the places a kind of file may be read from: directories,
// whose whole tree is inside (Confine), and single files, each inside by
// itself. The zero value holds none, so nothing is inside it.
type Roots struct {
	dirs, files []string // absolute and clean
}

// NewRoots returns the directory roots dirs, made absolute. Each must be
// an existing directory (resolved through its links when checked), so that
// a misspelt root is an error at start-up rather than a refusal of every
// file later.
func NewRoots(dirs ...string) (Roots, error) {
	var r Roots
	for _, d := range dirs {
		if d == "" {
			return Roots{}, errors.New("root: empty path")
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return Roots{}, fmt.Errorf("root %s: %w", d, err)
		}
		st, err := os.Stat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Roots{}, fmt.Errorf("root %s: no such directory", abs)
		case err != nil:
			return Roots{}, fmt.Errorf("root %s: %w", abs, err)
		}
		if !st.IsDir() {
			return Roots{}, fmt.Errorf("root %s: not a directory", abs)
		}
		if !slices.Contains(r.dirs, abs) {
			r.dirs = append(r.dirs, abs)
		}
	}
	return r, nil
}

// WithFile returns r with the single file at path (absolute, or relative
// to the working directory) inside as well; the file need not exist yet.
func (r Roots) WithFile(path string) (Roots, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return r, fmt.Errorf("root %s: %w", path, err)
	}
	if !slices.Contains(r.files, abs) {
		r.files = append(slices.Clip(r.files), abs)
	}
	return r, nil
}

// Empty reports whether r holds no root.
func (r Roots) Empty() bool { return len(r.dirs) == 0 && len(r.files) == 0 }

// List is every root, the directories first, as errors name them.
func (r Roots) List() []string { return append(slices.Clip(r.dirs), r.files...) }

// Resolve returns the absolute path that path names inside r, or an error
// wrapping ErrOutsideRoot (an *OutsideError naming every root) when it
// names none. A file root is named by its own path, absolute or relative
// to the working directory. Otherwise an absolute path must lie inside a
// directory root, and a relative one is looked up in each directory root
// in order: the first that holds it wins, and when none does the error
// wraps fs.ErrNotExist (unless a link takes it out of one of them). Every
// candidate in a directory root is judged by Confine, links resolved.
func (r Roots) Resolve(path string) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	if abs, err := filepath.Abs(path); err == nil && slices.Contains(r.files, abs) {
		return abs, nil // a file root is inside itself, links and all
	}
	var out *OutsideError // the most telling refusal: one through a link
	var missing []string  // relative: the candidates that do not exist
	for _, d := range r.dirs {
		p, err := Confine(d, path)
		var oe *OutsideError
		switch {
		case errors.As(err, &oe):
			if out == nil || out.Link == "" {
				out = oe
			}
			continue
		case err != nil:
			return "", err
		case filepath.IsAbs(path):
			return p, nil
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("path %s: %w", path, err)
		}
		missing = append(missing, p)
	}
	// A file that a link takes out says more than its absence elsewhere.
	if len(missing) > 0 && (out == nil || out.Link == "") {
		return "", fmt.Errorf("path %s: %w in %s (looked for %s)", path, fs.ErrNotExist, rootList(r.List()), strings.Join(missing, ", "))
	}
	e := &OutsideError{Path: path, Roots: r.List()}
	if out != nil && out.Link != "" {
		e.Link, e.Real = out.Link, out.Real
	}
	return "", e
}

// Open opens the regular file that path names inside r (Resolve) for a
// read of at most max bytes (Open).
func (r Roots) Open(path string, max int64) (*File, error) {
	p, err := r.Resolve(path)
	if err != nil {
		return nil, err
	}
	return Open(p, max)
}
