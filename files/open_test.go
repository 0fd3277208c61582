package files

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestOpenReadsOnlyRegularFilesOfBoundedSize checks that Open and
// ReadFile refuse a directory, a character device and a /proc file
// (ErrNotRegular) and a file over the limit (ErrTooLarge) before reading
// a byte of it, and read a regular file whole.
func TestOpenReadsOnlyRegularFilesOfBoundedSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	body := bytes.Repeat([]byte("0123456789"), 1000)
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(p, int64(len(body))); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("ReadFile of a regular file at its limit: %d bytes, %v", len(got), err)
	}
	if got, err := ReadFile(p, 0); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("ReadFile without a limit: %d bytes, %v", len(got), err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(empty, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReadFile of an empty file: %q, %v", got, err)
	}
	if _, err := ReadFile(p, int64(len(body))-1); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "10000 bytes") {
		t.Errorf("a file one byte over the limit: %v, want ErrTooLarge naming it and its size", err)
	}
	cases := map[string]string{dir: "a directory"}
	if runtime.GOOS == "linux" {
		cases["/dev/zero"] = "a character device"
		cases["/proc/self/environ"] = "/proc"
	}
	for path, why := range cases {
		_, err := ReadFile(path, 1<<20)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), why) {
			t.Errorf("ReadFile(%s): %v, want ErrNotRegular naming it and %q", path, err, why)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestReadRefusesAFileThatChanged: a file that grows or shrinks after it
// was opened is an ErrChanged error when read, never a silent cut at the
// size it had or a short read taken for the whole.
func TestReadRefusesAFileThatChanged(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*os.File) error
	}{
		{"grew", func(f *os.File) error { _, err := f.WriteString("more"); return err }},
		{"shrank", func(f *os.File) error { return f.Truncate(3) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, []byte("time,open\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(p, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.change(w); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if _, err := io.ReadAll(f); !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), p) {
				t.Errorf("read: %v, want ErrChanged naming the file", err)
			}
		})
	}
}
