package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideRoot is wrapped by errors about a checkpoint path that leads
// out of the configured checkpoint root.
var ErrOutsideRoot = errors.New("outside the checkpoint root")

// Confine returns the absolute form of path (relative paths are taken
// relative to root) if it lies inside root, and an error wrapping
// ErrOutsideRoot otherwise. Inside means both lexically, after ".."
// elements are resolved, and physically: the longest part of the path that
// exists is resolved through its symbolic links, and must still be inside
// root resolved the same way, so a link planted inside the root that
// points elsewhere is refused like "../..". Root itself may be a link.
//
// The check is made when the path is used, by the process that uses it; it
// guards against a run config, a workflow input or a database row naming a
// file outside the root, not against a local user who can change the
// directory tree between the check and the use (the root must not be
// writable by other users).
func Confine(root, path string) (string, error) {
	if root == "" {
		root = "."
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("checkpoint root %s: %w", root, err)
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(absRoot, p)
	}
	p = filepath.Clean(p)
	if !within(absRoot, p) {
		return "", fmt.Errorf("checkpoint path %s: %w %s", path, ErrOutsideRoot, absRoot)
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return "", fmt.Errorf("checkpoint root %s: %w", absRoot, err)
	}
	// The deepest ancestor of p (p included) that exists, resolved.
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("checkpoint path %s: %w", path, err)
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
		return "", fmt.Errorf("checkpoint path %s: %w", path, err)
	}
	if !within(realRoot, filepath.Join(real, rest)) {
		return "", fmt.Errorf("checkpoint path %s: %s resolves to %s, %w %s", path, existing, real, ErrOutsideRoot, realRoot)
	}
	return p, nil
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
