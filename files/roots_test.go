package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootsResolveOnlyInsideTheirRoots checks Resolve's rule: an absolute
// path inside a directory root, a relative one looked up in the directory
// roots in order, a file root by its own path (absolute or relative to the
// working directory), and everything else refused with every root named,
// a link's way out included; a relative path in no root is
// fs.ErrNotExist.
func TestRootsResolveOnlyInsideTheirRoots(t *testing.T) {
	base := t.TempDir()
	a, b, outside := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "outside")
	for _, d := range []string{a, b, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) string {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(filepath.Join(a, "both.csv"))
	write(filepath.Join(b, "both.csv"))
	write(filepath.Join(b, "only-b.csv"))
	typed := write(filepath.Join(outside, "typed.csv"))
	secret := write(filepath.Join(outside, "secret"))
	if err := os.Symlink(secret, filepath.Join(a, "link.csv")); err != nil {
		t.Fatal(err)
	}
	roots, err := NewRoots(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if roots, err = roots.WithFile(typed); err != nil {
		t.Fatal(err)
	}
	t.Chdir(outside)
	for path, want := range map[string]string{
		"both.csv":                   filepath.Join(a, "both.csv"), // the first root wins
		"only-b.csv":                 filepath.Join(b, "only-b.csv"),
		filepath.Join(b, "both.csv"): filepath.Join(b, "both.csv"),
		typed:                        typed,
		"typed.csv":                  typed, // relative to the working directory
		"./typed.csv":                typed,
		filepath.Join(a, "new.csv"):  filepath.Join(a, "new.csv"), // not there yet: Open says so
	} {
		if got, err := roots.Resolve(path); err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %s", path, got, err, want)
		}
	}
	for _, path := range []string{secret, "secret", "../outside/secret", "link.csv", filepath.Join(a, "link.csv"), "/etc/passwd"} {
		_, err := roots.Resolve(path)
		var oe *OutsideError
		if path == "secret" {
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
				t.Errorf("Resolve(%s): %v, want fs.ErrNotExist naming both roots", path, err)
			}
			continue
		}
		if !errors.As(err, &oe) || !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("Resolve(%s): %v, want an *OutsideError", path, err)
			continue
		}
		for _, w := range []string{path, a, b, typed} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Resolve(%s): %q does not name %s", path, err, w)
			}
		}
		if strings.Contains(path, "link") && (oe.Link != filepath.Join(a, "link.csv") || oe.Real != secret) {
			t.Errorf("Resolve(%s): link %q → %q, want %s → %s", path, oe.Link, oe.Real, filepath.Join(a, "link.csv"), secret)
		}
	}
	var none Roots
	if _, err := none.Resolve(typed); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("no roots: Resolve(%s) = %v, want ErrOutsideRoot", typed, err)
	}
	if _, err := NewRoots(filepath.Join(base, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("NewRoots(missing directory) = %v, want an error naming it", err)
	}
	if _, err := NewRoots(typed); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("NewRoots(a file) = %v, want not a directory", err)
	}
}
