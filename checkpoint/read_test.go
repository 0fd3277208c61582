package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocatedBy returns how many bytes of heap f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sparse creates a file of size bytes that holds prefix and then zeros
// (a hole: it takes no disk space).
func sparse(t *testing.T, size int64, prefix []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sparse.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(prefix); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadChecksSizesBeforeAllocating: a 10 GB file, a header claiming
// 2^60 bytes in a 3 GB file, a file over a lowered limit, and a valid
// header whose tensors do not fill the 3 GB after it are refused from the
// file's size, the 8-byte length and the header alone, allocating next to
// nothing and reading no data; a truncated file is refused naming
// the truncation. Each refusal names the file and wraps ErrCorrupt (a
// size refusal ErrTooLarge as well).
func TestReadChecksSizesBeforeAllocating(t *testing.T) {
	ctx := t.Context()
	valid := encodeBytes(t, mixed())
	small := filepath.Join(t.TempDir(), "small.safetensors")
	if err := os.WriteFile(small, valid, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		opt        Options
		want       string
		tooLarge   bool
	}{
		{"10 GB file", sparse(t, 10<<30, valid[:8]), Options{}, "has 10737418240 bytes, more than the limit of 4294967296", true},
		{"header of 2^60 bytes", sparse(t, 3<<30, binary.LittleEndian.AppendUint64(nil, 1<<60)), Options{}, "header length 1152921504606846976 exceeds the limit", false},
		{"header past the end", sparse(t, 1<<20, binary.LittleEndian.AppendUint64(nil, 99_000_000)), Options{}, "runs past the end of the 1048576-byte file", false},
		{"a small header before 3 GB of zeros", sparse(t, 3<<30, file(`{}      `, nil)), Options{}, "tensors cover 0 bytes of the 3221225456-byte data section", false},
		{"over a lowered limit", small, Options{MaxBytes: int64(len(valid)) - 1}, "more than the limit", true},
	}
	for _, c := range cases {
		var err error
		start := time.Now()
		alloc := allocatedBy(func() { _, _, err = Read(ctx, c.path, c.opt) })
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) != c.tooLarge || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v; want ErrCorrupt (ErrTooLarge %t) naming the file and %q", c.name, err, c.tooLarge, c.want)
		}
		if alloc > 1<<20 {
			t.Errorf("%s: refusing it allocated %d bytes, want under 1 MiB", c.name, alloc)
		}
		t.Logf("%s: refused in %v after allocating %d bytes", c.name, time.Since(start), alloc)
	}
	if _, _, err := Read(ctx, small, Options{MaxBytes: int64(len(valid))}); err != nil {
		t.Errorf("a file of exactly the limit: %v", err)
	}
	cut := filepath.Join(t.TempDir(), "cut.safetensors")
	if err := os.WriteFile(cut, valid[:len(valid)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(ctx, cut, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated file: %v, want ErrCorrupt saying truncated", err)
	}
}

// cancelAfterFirst is a reader that cancels its context once it has
// returned its first bytes, as SIGTERM would in the middle of a read.
type cancelAfterFirst struct {
	r      io.Reader
	cancel context.CancelFunc
	reads  int
	bytes  int
}

func (c *cancelAfterFirst) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.reads++
	c.bytes += n
	if c.bytes > 8 { // past the length prefix: in the body
		c.cancel()
	}
	return n, err
}

// TestReadStopsWhenTheContextEnds: a read whose context is already done
// reads nothing, and one cancelled in the middle of a 3-chunk file stops
// after the chunk in progress, with the context's error (not ErrCorrupt:
// the file is fine).
func TestReadStopsWhenTheContextEnds(t *testing.T) {
	ck := &Checkpoint{Tensors: []Tensor{U8Tensor("big", []int{3 * readChunk}, bytes.Repeat([]byte{7}, 3*readChunk))}}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	if _, err := Write(path, ck, Options{}); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Read(done, path, Options{}); !errors.Is(err, context.Canceled) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Read with a cancelled context: %v, want context.Canceled naming the file", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &cancelAfterFirst{r: f, cancel: cancel}
	if _, err := readBounded(ctx, r, st.Size()); !errors.Is(err, context.Canceled) {
		t.Fatalf("readBounded cancelled mid-read: %v, want context.Canceled", err)
	}
	if r.bytes >= int(st.Size()) || r.bytes > 8+readChunk {
		t.Errorf("the read went on to byte %d of %d after its context ended (one chunk is %d)", r.bytes, st.Size(), readChunk)
	}
}

// TestWriteRefusesMoreThanTheLimit: a checkpoint larger than the writer's
// limit is refused before anything is written (no reader with that limit
// could load it): ErrTooLarge, not ErrCorrupt, and the directory stays
// empty, in a file store as with Write.
func TestWriteRefusesMoreThanTheLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	opt := Options{MaxBytes: 100}
	_, err := Write(path, mixed(), opt)
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--checkpoint-max-bytes") {
		t.Errorf("Write over the limit: %v; want ErrTooLarge naming the file and the flag", err)
	}
	s, err := OpenStore(t.Context(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(t.Context(), filepath.Join(dir, "other.safetensors"), tiny()); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Store.Write over the limit: %v, want ErrTooLarge", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("refused writes left %v", names)
	}
}
