//go:build unix

package files

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesANamedPipeWithoutWaiting: a named pipe with no writer is
// refused as not regular at once; an open of it would wait for a writer
// for ever.
func TestOpenRefusesANamedPipeWithoutWaiting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := ReadFile(p, 0); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a named pipe") {
			t.Errorf("ReadFile(fifo): %v, want ErrNotRegular, a named pipe", err)
		}
		t.Logf("refused in %v", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile(fifo) still waiting after 5 s")
	}
}
