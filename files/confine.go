package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideRoot is wrapped by every error about a path that leads out of
// its root or roots (*OutsideError).
var ErrOutsideRoot = errors.New("outside the root")

// OutsideError is a path that leads out of its roots: lexically (an
// absolute path elsewhere, "..") or through a symbolic link.
type OutsideError struct {
	Path string // as given
	// Link is the deepest existing part of Path, whose symbolic links
	// resolve to Real outside the roots; both are "" when Path leaves its
	// roots lexically.
	Link, Real string
	Roots      []string // absolute; resolved through their links when Link is set
}

func (e *OutsideError) Error() string {
	return fmt.Sprintf("path %s: %soutside %s", e.Path, e.Via(), rootList(e.Roots))
}

// Via says how a link took the path out ("L resolves to R, "), or is ""
// when the path leaves its roots lexically.
func (e *OutsideError) Via() string {
	if e.Link == "" {
		return ""
	}
	return fmt.Sprintf("%s resolves to %s, ", e.Link, e.Real)
}

// Unwrap makes errors.Is(err, ErrOutsideRoot) true.
func (e *OutsideError) Unwrap() error { return ErrOutsideRoot }

// Confine returns the absolute form of path (relative paths are taken
// relative to root) if it lies inside root, and an *OutsideError
// otherwise. Inside means both lexically, after ".." elements are
// resolved, and physically: the longest part of the path that exists is
// resolved through its symbolic links, and must still be inside root
// resolved the same way, so a link planted inside the root that points
// elsewhere is refused like "../..". Root itself may be a link, and may be
// a file: then only that file is inside. A path that does not exist yet is
// judged by its deepest existing ancestor.
//
// The check is made when the path is used, by the process that uses it
// (see the package comment for what it does not guard against).
func Confine(root, path string) (string, error) {
	if root == "" {
		root = "."
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("root %s: %w", root, err)
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(absRoot, p)
	}
	p = filepath.Clean(p)
	if !within(absRoot, p) {
		return "", &OutsideError{Path: path, Roots: []string{absRoot}}
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return "", fmt.Errorf("root %s: %w", absRoot, err)
	}
	// The deepest ancestor of p (p included) that exists, resolved.
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("path %s: %w", path, err)
		}
		parent := filepath.Dir(existing)
		rest = filepath.Join(filepath.Base(existing), rest)
		if parent == existing {
			break
		}
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("path %s: %w", path, err)
	}
	if !within(realRoot, filepath.Join(real, rest)) {
		return "", &OutsideError{Path: path, Link: existing, Real: real, Roots: []string{realRoot}}
	}
	return p, nil
}

// rootList names roots in an error: "the root R" or "the roots R1, R2".
func rootList(roots []string) string {
	if len(roots) == 1 {
		return "the root " + roots[0]
	}
	return "the roots " + strings.Join(roots, ", ")
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
