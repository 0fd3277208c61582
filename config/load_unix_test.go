//go:build unix

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/files"
)

// TestLoadReadsOnlyABoundedRegularFile: a config path that names a file
// over MaxFileBytes, a directory, a named pipe or a device fails at once,
// naming the file and the reason, before any of it is read (a pipe would
// block the read for ever, /dev/zero grow it without end); a config file
// within the bound loads.
func TestLoadReadsOnlyABoundedRegularFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"epochs": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(good); err != nil || c.Epochs != 3 {
		t.Fatalf("Load(good) = %d epochs, %v", c.Epochs, err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"epochs": 3`+strings.Repeat(" ", MaxFileBytes)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]error{big: files.ErrTooLarge, dir: files.ErrNotRegular, fifo: files.ErrNotRegular, "/dev/zero": files.ErrNotRegular}
	for path, want := range cases {
		done := make(chan error, 1)
		go func() { _, err := Load(path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Load(%s): %v, want %v naming the file", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) has not returned after 5 s", path)
		}
	}
}
