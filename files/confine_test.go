package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfineRefusesPathsThatLeaveTheRoot covers the ways a path can lead
// out of the root: "..", an absolute path elsewhere, and a
// symbolic link (to a directory or to a file) that points outside; and
// the ways it stays inside: plain relative and absolute paths, paths not
// created yet, links that point inside, and a root that is itself a link.
func TestConfineRefusesPathsThatLeaveTheRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "runs", "r1"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		filepath.Join(root, "escape"):          outside,
		filepath.Join(root, "runs", "r1", "f"): filepath.Join(outside, "secret"),
		filepath.Join(root, "inner"):           filepath.Join(root, "runs"),
		filepath.Join(base, "rootlink"):        root,
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		root, path string
		inside     bool
	}{
		{root, "runs/r1/epoch-000001.safetensors", true},
		{root, filepath.Join(root, "runs", "r1", "epoch-000001.safetensors"), true},
		{root, "new/deep/dir/epoch-000001.safetensors", true},
		{root, "inner/r1/epoch-000001.safetensors", true},
		{root, ".", true},
		{filepath.Join(base, "rootlink"), "runs/r1/x.safetensors", true},
		{root, "../outside/secret", false},
		{root, "runs/../../outside/x", false},
		{root, filepath.Join(outside, "x.safetensors"), false},
		{root, "/etc/passwd", false},
		{root, "escape/x.safetensors", false},
		{root, "escape/new/dir/x.safetensors", false},
		{root, "runs/r1/f", false},
		{filepath.Join(base, "rootlink"), "escape/x", false},
		// A file as the root: only the file itself is inside.
		{filepath.Join(outside, "secret"), filepath.Join(outside, "secret"), true},
		{filepath.Join(outside, "secret"), filepath.Join(outside, "other"), false},
		{filepath.Join(root, "runs", "r1", "f"), filepath.Join(root, "runs", "r1", "f"), true},
	}
	for _, c := range cases {
		got, err := Confine(c.root, c.path)
		switch {
		case c.inside && err != nil:
			t.Errorf("Confine(%s, %s): %v, want it accepted", c.root, c.path, err)
		case c.inside && !filepath.IsAbs(got):
			t.Errorf("Confine(%s, %s) = %s, want an absolute path", c.root, c.path, got)
		case !c.inside && !errors.Is(err, ErrOutsideRoot):
			t.Errorf("Confine(%s, %s) = %q, %v; want an error wrapping ErrOutsideRoot", c.root, c.path, got, err)
		case !c.inside && !strings.Contains(err.Error(), c.path):
			t.Errorf("Confine(%s, %s): %v does not name the path", c.root, c.path, err)
		}
	}
}
