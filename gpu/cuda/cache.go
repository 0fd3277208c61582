package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dqnflow/dqnflow/files"
)

// CompileCached is Compile with an on-disk cache in dir (created if needed).
// The entry for a compilation is dir/<key>.cubin, key being the SHA-256 of
// the source, the name, the architecture, the options and the NVRTC version,
// so a change to any of them compiles afresh. An entry holds the CUBIN
// followed by its own SHA-256; one that is unreadable, truncated or altered
// is compiled again and rewritten, never trusted. Entries are written
// atomically (temporary file, fsync, rename, fsync of dir), so concurrent
// workers sharing dir at most compile twice.
//
// When compiling succeeds but the entry cannot be written, CompileCached
// returns the valid CUBIN together with the error, so a caller may go on
// without the cache.
func (c *Compiler) CompileCached(dir, src, name string, arch int, opts ...string) ([]byte, error) {
	if c == nil || c.api == nil {
		return nil, fmt.Errorf("%w: nil Compiler", ErrNoNVRTC)
	}
	if dir == "" {
		return nil, errors.New("nvrtc cache: empty folder name")
	}
	path := filepath.Join(dir, c.cacheKey(src, name, arch, opts)+".cubin")
	if cubin, err := readCacheEntry(path); err == nil {
		return cubin, nil
	}
	cubin, _, err := c.Compile(src, name, arch, opts...)
	if err != nil {
		return nil, err
	}
	if err := writeCacheEntry(path, cubin); err != nil {
		return cubin, fmt.Errorf("nvrtc cache: %s compiled, but the cache entry cannot be written: %w", name, err)
	}
	return cubin, nil
}

// cacheKey hashes every input of a compilation, each field length-prefixed
// so that no two different inputs give the same byte stream.
func (c *Compiler) cacheKey(src, name string, arch int, opts []string) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("dqnflow nvrtc cache v1")
	field(src)
	field(name)
	field(strconv.Itoa(arch))
	field(strconv.Itoa(len(opts)))
	for _, o := range opts {
		field(o)
	}
	field(strconv.Itoa(c.major) + "." + strconv.Itoa(c.minor))
	return hex.EncodeToString(h.Sum(nil))
}

// maxCacheEntryBytes bounds a cache entry: the CUBINs of every kernel
// together are a few megabytes.
const maxCacheEntryBytes = 256 << 20

// readCacheEntry returns the CUBIN of a valid entry: an ELF image followed by
// its SHA-256.
func readCacheEntry(path string) ([]byte, error) {
	b, err := files.ReadFile(path, maxCacheEntryBytes)
	if err != nil {
		return nil, err
	}
	if len(b) <= sha256.Size {
		return nil, fmt.Errorf("%s: truncated", path)
	}
	cubin, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(cubin); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%s: checksum mismatch", path)
	}
	if !bytes.HasPrefix(cubin, elfMagic) {
		return nil, fmt.Errorf("%s: not an ELF CUBIN", path)
	}
	return cubin, nil
}

// writeCacheEntry writes cubin and its SHA-256 to path atomically.
func writeCacheEntry(path string, cubin []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	sum := sha256.Sum256(cubin)
	_, err = f.Write(append(cubin[:len(cubin):len(cubin)], sum[:]...))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync folder %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync folder %s: %w", dir, err)
	}
	return nil
}
