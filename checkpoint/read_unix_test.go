//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadRefusesWhatIsNotARegularFile: a directory, a character device
// (/dev/zero, which never ends), a symbolic link to it and a named pipe
// (whose open blocks until a writer comes) are refused at once, naming
// what they are, before they are opened or read.
func TestReadRefusesWhatIsNotARegularFile(t *testing.T) {
	link := filepath.Join(t.TempDir(), "zero.safetensors")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "pipe.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		t.TempDir(): "a directory",
		"/dev/zero": "a character device",
		link:        "a character device",
		fifo:        "a named pipe",
	} {
		var err error
		alloc := allocatedBy(func() {
			done := make(chan error, 1)
			go func() { _, _, err := Read(t.Context(), path, Options{}); done <- err }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Read(%s) still runs after 10 s", path)
			}
		})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file: it is "+want) || !strings.Contains(err.Error(), path) {
			t.Errorf("Read(%s) = %v; want ErrCorrupt naming it %s, not a regular file", path, err, want)
		}
		if alloc > 1<<20 {
			t.Errorf("Read(%s) allocated %d bytes", path, alloc)
		}
	}
}
