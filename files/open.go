package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Errors of Open, ReadFile and File.Read, wrapped by errors that name the
// file.
var (
	// ErrNotRegular: the path names a directory, a device, a named pipe,
	// a socket, or a file such as those of /proc that holds more than its
	// size says.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is over the size limit of the read.
	ErrTooLarge = errors.New("over the size limit")
	// ErrChanged: the file grew or shrank while it was read.
	ErrChanged = errors.New("changed while it was read")
)

// File is a regular file opened by Open: a reader of exactly the bytes
// its size said when it was opened.
type File struct {
	f    *os.File
	name string
	size int64 // at open
	n    int64 // bytes read
}

// Open opens the file at path for reading, if it is a regular file of at
// most max bytes (max ≤ 0: any size). The type is checked before the open
// (so that no device, pipe or socket is ever opened: opening some has
// effects, a pipe's open waits for a writer) and again on the opened file,
// which is what is read. On Unix the open does not wait (O_NONBLOCK, which
// changes nothing for a regular file).
func Open(path string, max int64) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err // *fs.PathError: names the path
	}
	if err := check(path, st, max); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	if err := check(path, st, max); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, name: path, size: st.Size()}, nil
}

// check refuses what is not a regular file of at most max bytes.
func check(path string, st fs.FileInfo, max int64) error {
	m := st.Mode()
	if !m.IsRegular() {
		kind := "a special file"
		switch {
		case m.IsDir():
			kind = "a directory"
		case m&fs.ModeNamedPipe != 0:
			kind = "a named pipe"
		case m&fs.ModeSocket != 0:
			kind = "a socket"
		case m&fs.ModeCharDevice != 0:
			kind = "a character device"
		case m&fs.ModeDevice != 0:
			kind = "a block device"
		}
		return fmt.Errorf("%s: %w: it is %s", path, ErrNotRegular, kind)
	}
	if max > 0 && st.Size() > max {
		return fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size(), max)
	}
	return nil
}

// Name is the path the file was opened by.
func (f *File) Name() string { return f.name }

// Size is the file's size when it was opened: all that Read returns.
func (f *File) Size() int64 { return f.size }

// Read reads up to the size the file had when it was opened. It returns
// io.EOF only when the file ends there; a file that holds more (it grew,
// or it is a /proc-style file whose size says 0) or less (it shrank) is an
// error wrapping ErrChanged or ErrNotRegular, never a silent cut.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if left := f.size - f.n; left > 0 {
		if int64(len(p)) > left {
			p = p[:left]
		}
		n, err := f.f.Read(p)
		f.n += int64(n)
		if err == io.EOF {
			return n, fmt.Errorf("%s: %w: it ended after %d of its %d bytes", f.name, ErrChanged, f.n, f.size)
		}
		return n, err
	}
	var probe [1]byte
	switch n, err := f.f.Read(probe[:]); {
	case n > 0 && f.size == 0:
		return 0, fmt.Errorf("%s: %w: its size says 0 bytes but it holds data (a /proc or /sys file?)", f.name, ErrNotRegular)
	case n > 0:
		return 0, fmt.Errorf("%s: %w: it holds more than the %d bytes it had when opened; read it again when it is complete", f.name, ErrChanged, f.size)
	case err == nil || err == io.EOF:
		return 0, io.EOF
	default:
		return 0, err
	}
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// ReadFile returns the contents of the regular file at path, of at most
// max bytes (Open): the one way dqnflow reads a whole file it is given
// (a config, a key, a certificate).
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte of room past the size, for the read that must find the end
	// (io.EOF, or the ErrChanged or ErrNotRegular of a file that holds
	// more): Read never fills it, so b is never grown and copied.
	b := make([]byte, 0, f.size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
