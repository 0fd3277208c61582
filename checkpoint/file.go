package checkpoint

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Write stores ck at path atomically: it validates ck, writes a temporary
// file in the same directory, fsyncs it, renames it over path and fsyncs the
// directory, so that path holds either the old file or the complete new one,
// never a partial write, even across a crash. On error the temporary file is
// removed and path is untouched. Writing the same checkpoint twice gives the
// same bytes, so a retried activity is harmless (an Ed25519 signature is
// deterministic too). The file is mode 0644. With opt.Keys the file is
// signed; a file larger than opt's size limit is refused before anything
// is written, since no reader with the same limit could load it.
func Write(path string, ck *Checkpoint, opt Options) (Info, error) {
	return write(context.Background(), path, ck, opt, nil)
}

// write is Write, calling hook (when not nil) at each WritePoint.
func write(ctx context.Context, path string, ck *Checkpoint, opt Options, hook WriteHook) (Info, error) {
	if hook == nil {
		hook = func(context.Context, WritePoint, string) error { return nil }
	}
	e, err := encode(ck, opt)
	if err != nil {
		return Info{}, fmt.Errorf("write %s: %w", path, err)
	}
	if size := e.bytes(); size > opt.maxBytes() {
		return Info{}, fmt.Errorf("write %s: %w", path, tooLarge("the checkpoint", size, opt.maxBytes()))
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return Info{}, fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			f.Close() // a second Close only returns an error, ignored here
			os.Remove(tmp)
		}
	}()

	w := bufio.NewWriterSize(f, 1<<20)
	info, err := e.writeTo(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = hook(ctx, TempSynced, tmp)
	}
	if err != nil {
		return Info{}, fmt.Errorf("write %s (temporary file %s): %w", path, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return Info{}, fmt.Errorf("write %s: the file is in place but its directory entry may not survive a crash: %w", path, err)
	}
	if err := hook(ctx, Renamed, path); err != nil {
		return Info{}, fmt.Errorf("write %s: the file is in place: %w", path, err)
	}
	info.Path = path
	return info, nil
}

// syncDir fsyncs a directory so that a rename inside it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// Read loads and verifies the checkpoint at path: a regular file of at
// most opt's size limit, read in chunks while ctx lasts, then Decode's
// checks and, with opt.Keys, its signature. It returns the checkpoint with
// the file's Info, whose SHA256 is the hash of the whole file. A damaged,
// oversized, non-regular or (with a key) unsigned or wrongly signed file
// gives an error that names path and wraps ErrCorrupt; a missing file
// wraps fs.ErrNotExist.
func Read(ctx context.Context, path string, opt Options) (*Checkpoint, Info, error) {
	b, err := readFile(ctx, path, opt.maxBytes())
	if err != nil {
		return nil, Info{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	ck, info, err := decode(ctx, b, opt)
	if err != nil {
		return nil, Info{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	info.Path = path
	return ck, info, nil
}

// ReadVerified is Read that also requires the whole-file SHA-256 to equal
// wantSHA256 (64 hex digits, as recorded when the file was written); a
// different hash wraps ErrCorrupt.
func ReadVerified(ctx context.Context, path, wantSHA256 string, opt Options) (*Checkpoint, Info, error) {
	want := strings.ToLower(wantSHA256)
	if b, err := hex.DecodeString(want); err != nil || len(b) != 32 {
		return nil, Info{}, fmt.Errorf("read checkpoint %s: recorded sha256 %q is not 64 hex digits", path, wantSHA256)
	}
	ck, info, err := Read(ctx, path, opt)
	if err != nil {
		return nil, Info{}, err
	}
	if info.SHA256 != want {
		return nil, Info{}, fmt.Errorf("read checkpoint %s: %w: file sha256 is %s, recorded %s", path, ErrCorrupt, info.SHA256, want)
	}
	return ck, info, nil
}
