package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfineSaysItIsACheckpointPath checks what Confine adds to
// files.Confine (which the files package tests case by case): its errors
// wrap ErrOutsideRoot and say "checkpoint path", for a path that leaves
// lexically and for one that a link takes out, and name the link.
func TestConfineSaysItIsACheckpointPath(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "escape")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if p, err := Confine(root, "runs/r1/epoch-000001.safetensors"); err != nil || p != filepath.Join(root, "runs", "r1", "epoch-000001.safetensors") {
		t.Errorf("a path inside: %q, %v", p, err)
	}
	for path, want := range map[string][]string{
		"../outside/x":  {"checkpoint path ../outside/x", "outside the checkpoint root " + root},
		"escape/x":      {"checkpoint path escape/x", link + " resolves to " + outside, "outside the checkpoint root"},
		"/etc/passwd":   {"checkpoint path /etc/passwd", "outside the checkpoint root"},
		"escape/new/dd": {link + " resolves to"},
	} {
		_, err := Confine(root, path)
		if !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("Confine(%s): %v, want ErrOutsideRoot", path, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Confine(%s): %q does not say %q", path, err, w)
			}
		}
	}
}
