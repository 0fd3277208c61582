//go:build unix

package cuda

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCacheEntryThatIsAPipeIsRefusedAtOnce: a cache entry replaced by a
// named pipe is an unreadable entry (compiled again), not a read that
// waits for a writer for ever.
func TestCacheEntryThatIsAPipeIsRefusedAtOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "entry.cubin")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readCacheEntry(p); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a named pipe was read as a cache entry")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("readCacheEntry of a named pipe has not returned after 5 s")
	}
}
