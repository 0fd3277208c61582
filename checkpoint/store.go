package checkpoint

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Store is where checkpoint blobs live, named by a URL:
//
//   - file:///dir (or a plain directory path): files under dir on this
//     host, written by Write (temporary file, fsync, rename, fsync of the
//     directory) and referred to by absolute path. Every path is confined to
//     dir (Confine), symbolic links included.
//   - s3://bucket/prefix: objects under prefix in a bucket of any
//     S3-compatible server (AWS, MinIO, Ceph, R2, versitygw), referred to as
//     s3://bucket/prefix/<key>. Query parameters configure the client as
//     gocloud.dev/blob/s3blob documents them (region, endpoint,
//     use_path_style, profile, ...), and the bucket is opened by
//     Options.Buckets (bucket.OpenS3 of package checkpoint/bucket, kept apart
//     so that readers of checkpoints do not link the AWS SDK); credentials come from the AWS SDK's
//     standard chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
//     AWS_PROFILE with ~/.aws/credentials and ~/.aws/config, or the
//     instance's role) and never from the URL, so a URL can be logged and
//     stored.
//
// An S3 object becomes visible only when its upload completes (a PUT, or
// the completion of a multipart upload); an interrupted upload leaves
// nothing under the key. Writes hash every byte (Info.SHA256, which the
// caller records in the metadata store) and Read verifies that hash, so a
// blob changed or truncated after it was written is refused as ErrCorrupt.
// Reads and writes follow the store's Options: its size limit (checked on
// a file's or an object's size before it is read) and, with a key, a
// signature on every blob written and a valid one required of every blob
// read.
type Store struct {
	location string // as String shows it: the URL, without credentials
	root     string // file: the directory
	bucket   *blob.Bucket
	name     string // s3: the bucket's name
	prefix   string // s3: the key prefix, "" or ending in "/"

	// Hook, when set, is called inside every write of a directory store
	// (WriteHook); nil, as in production, calls nothing.
	Hook WriteHook
	opt  Options
}

// Local is the store of the directory root on this host, with the zero
// Options (unsigned, DefaultMaxBytes); "" means the working directory.
func Local(root string) *Store {
	if root == "" {
		root = "."
	}
	return &Store{location: root, root: root}
}

// OpenStore opens the store that location names: a directory path,
// file:///dir or s3://bucket/prefix (see Store), reading and writing with
// opt; an s3 location's bucket is opened by opt.Buckets. Close releases it.
func OpenStore(ctx context.Context, location string, opt Options) (*Store, error) {
	s, err := openStore(ctx, location, opt.Buckets)
	if err != nil {
		return nil, err
	}
	s.opt = opt
	return s, nil
}

func openStore(ctx context.Context, location string, buckets BucketOpener) (*Store, error) {
	if !strings.Contains(location, "://") {
		return Local(location), nil
	}
	u, err := url.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %q: %w", location, err)
	}
	if u.User != nil {
		// Said without echoing the URL, which holds the secret.
		return nil, fmt.Errorf("checkpoint store %s://%s: the URL carries credentials; give them through AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or an AWS profile instead, never in a URL or a config", u.Scheme, u.Host)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("checkpoint store %s: a file URL names a directory of this host (file:///dir), not host %q", location, u.Host)
		}
		if u.Path == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("checkpoint store %s: want file:///absolute/dir with no query", location)
		}
		s := Local(filepath.FromSlash(u.Path))
		s.location = location
		return s, nil
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("checkpoint store %s: no bucket; want s3://bucket/prefix", location)
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" {
			if err := checkKey(prefix); err != nil {
				return nil, fmt.Errorf("checkpoint store %s: prefix: %w", location, err)
			}
			prefix += "/"
		}
		if buckets == nil {
			return nil, fmt.Errorf("checkpoint store %s: this program opens no s3 buckets (checkpoint.Options.Buckets is nil; package checkpoint/bucket has the opener)", location)
		}
		b, err := buckets(ctx, &url.URL{Scheme: "s3", Host: u.Host, RawQuery: u.RawQuery})
		if err != nil {
			return nil, fmt.Errorf("checkpoint store %s: %w", location, err)
		}
		return &Store{location: location, bucket: b, name: u.Host, prefix: prefix}, nil
	}
	return nil, fmt.Errorf("checkpoint store %s: scheme %q is not supported; use a directory, file:///dir or s3://bucket/prefix", location, u.Scheme)
}

// String is the store's location, safe to log (it never holds credentials).
func (s *Store) String() string { return s.location }

// Remote reports whether the store is shared between hosts (s3), so that
// a run may resume on any worker that opens the same URL.
func (s *Store) Remote() bool { return s.bucket != nil }

// Close releases the store's client.
func (s *Store) Close() error {
	if s.bucket != nil {
		return s.bucket.Close()
	}
	return nil
}

// Check makes sure the store can be reached: the directory exists, or the
// bucket answers a listing. It writes nothing.
func (s *Store) Check(ctx context.Context) error {
	if s.bucket == nil {
		st, err := os.Stat(s.root)
		if err != nil {
			return fmt.Errorf("checkpoint store %s: %w", s, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("checkpoint store %s: not a directory", s)
		}
		return nil
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: s.prefix})
	if _, err := it.Next(ctx); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("checkpoint store %s: %w", s, err)
	}
	return nil
}

// Locate is the URI of the blob at rel, a slash- or OS-separated path
// relative to the store (an absolute one is allowed in a file store when it
// lies inside the root). A rel that leads out of the store wraps
// ErrOutsideRoot.
func (s *Store) Locate(rel string) (string, error) {
	if s.bucket == nil {
		return s.path(rel)
	}
	key := filepath.ToSlash(rel)
	if path.IsAbs(key) {
		return "", fmt.Errorf("checkpoint path %s: %w s3://%s/%s (an absolute path in an object store)", rel, ErrOutsideRoot, s.name, s.prefix)
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("checkpoint path %s: %w", rel, err)
	}
	return "s3://" + s.name + "/" + s.prefix + key, nil
}

// checkKey refuses object keys with empty, "." or ".." elements, which a
// file store would resolve and an object store would not.
func checkKey(key string) error {
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("%w: element %q in %q", ErrOutsideRoot, el, key)
		}
	}
	return nil
}

// path is the file of uri in a file store, which must lie inside the
// root; an s3:// URI wraps ErrOutsideRoot.
func (s *Store) path(uri string) (string, error) {
	if strings.Contains(uri, "://") {
		return "", fmt.Errorf("checkpoint %s: %w %s (this worker's checkpoint store is a directory; give it the store the run was written to)", uri, ErrOutsideRoot, s.root)
	}
	return Confine(s.root, uri)
}

// key is the object key of uri, which must name an object of this store's
// bucket under its prefix; otherwise the error wraps ErrOutsideRoot.
func (s *Store) key(uri string) (string, error) {
	want := "s3://" + s.name + "/" + s.prefix
	k, ok := strings.CutPrefix(uri, want)
	if !ok || k == "" {
		return "", fmt.Errorf("checkpoint %s: %w %s", uri, ErrOutsideRoot, want)
	}
	if err := checkKey(k); err != nil {
		return "", fmt.Errorf("checkpoint %s: %w", uri, err)
	}
	return s.prefix + k, nil
}

// Write stores ck at uri (from Locate) atomically: a reader sees either
// nothing, the old blob, or the complete new one. In a file store that is
// Write's temporary file, fsync and rename; in an object store the upload
// becomes visible only when it completes, and an upload interrupted by an
// error or a cancelled ctx is aborted. The size the server reports is
// checked against the bytes sent. The same checkpoint written twice gives
// the same bytes, so a retried activity is harmless.
func (s *Store) Write(ctx context.Context, uri string, ck *Checkpoint) (Info, error) {
	if s.bucket == nil {
		p, err := s.path(uri)
		if err != nil {
			return Info{}, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Info{}, fmt.Errorf("write %s: %w", p, err)
		}
		return write(ctx, p, ck, s.opt, s.Hook)
	}
	key, err := s.key(uri)
	if err != nil {
		return Info{}, err
	}
	e, err := encode(ck, s.opt)
	if err != nil {
		return Info{}, fmt.Errorf("write %s: %w", uri, err)
	}
	if size := e.bytes(); size > s.opt.maxBytes() {
		return Info{}, fmt.Errorf("write %s: %w", uri, tooLarge("the checkpoint", size, s.opt.maxBytes()))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // aborts the upload unless Close completed it
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return Info{}, fmt.Errorf("write %s: %w", uri, err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	info, err := e.writeTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		cancel()
		w.Close() // aborts: the context is cancelled
		return Info{}, fmt.Errorf("write %s: upload aborted: %w", uri, err)
	}
	if err := w.Close(); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", uri, err)
	}
	attrs, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("write %s: the upload completed but the object cannot be found: %w", uri, err)
	}
	if attrs.Size != info.Bytes {
		return Info{}, fmt.Errorf("write %s: %w: the server holds %d bytes, %d were sent", uri, ErrCorrupt, attrs.Size, info.Bytes)
	}
	info.Path = uri
	return info, nil
}

// Read loads and verifies the checkpoint at uri (the checks of the
// package's Read: size limit, Decode's checks, the signature when the
// store has a key) and, when wantSHA256 is not empty, that the whole blob
// hashes to it. A damaged, oversized, substituted or (with a key) unsigned
// blob wraps ErrCorrupt; a missing one wraps fs.ErrNotExist; a uri outside
// the store wraps ErrOutsideRoot.
func (s *Store) Read(ctx context.Context, uri, wantSHA256 string) (*Checkpoint, Info, error) {
	if s.bucket == nil {
		p, err := s.path(uri)
		if err != nil {
			return nil, Info{}, err
		}
		if wantSHA256 == "" {
			return Read(ctx, p, s.opt)
		}
		return ReadVerified(ctx, p, wantSHA256, s.opt)
	}
	want := strings.ToLower(wantSHA256)
	if wantSHA256 != "" {
		if b, err := hex.DecodeString(want); err != nil || len(b) != 32 {
			return nil, Info{}, fmt.Errorf("read checkpoint %s: recorded sha256 %q is not 64 hex digits", uri, wantSHA256)
		}
	}
	key, err := s.key(uri)
	if err != nil {
		return nil, Info{}, err
	}
	b, err := s.readObject(ctx, key)
	if err != nil {
		switch {
		case gcerrors.Code(err) == gcerrors.NotFound:
			return nil, Info{}, fmt.Errorf("read checkpoint %s: %w", uri, fs.ErrNotExist)
		case strings.Contains(err.Error(), "checksum did not match"):
			// The AWS SDK checks the object against the checksum the server
			// stored at upload (its error type is unexported): the stored
			// bytes changed since.
			return nil, Info{}, fmt.Errorf("read checkpoint %s: %w: the object no longer matches the checksum stored with it: %v", uri, ErrCorrupt, err)
		}
		return nil, Info{}, fmt.Errorf("read checkpoint %s: %w", uri, err)
	}
	ck, info, err := decode(ctx, b, s.opt)
	if err != nil {
		return nil, Info{}, fmt.Errorf("read checkpoint %s: %w", uri, err)
	}
	if want != "" && info.SHA256 != want {
		return nil, Info{}, fmt.Errorf("read checkpoint %s: %w: object sha256 is %s, recorded %s", uri, ErrCorrupt, info.SHA256, want)
	}
	info.Path = uri
	return ck, info, nil
}

// readObject reads the object at key: its size, as the server reports
// it, is checked against the store's limit before anything is
// downloaded, and the body is read as readBounded reads a file.
func (s *Store) readObject(ctx context.Context, key string) ([]byte, error) {
	attrs, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	if max := s.opt.maxBytes(); attrs.Size > max {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, tooLarge("the object", attrs.Size, max))
	}
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readBounded(ctx, r, attrs.Size)
}

// Delete removes the blob at uri; one already gone counts as deleted. In a
// file store the blob's directory must exist: a missing one means this
// host does not see the storage the blob was written to.
func (s *Store) Delete(ctx context.Context, uri string) error {
	if s.bucket == nil {
		p, err := s.path(uri)
		if err != nil {
			return fmt.Errorf("delete checkpoint: %w", err)
		}
		if _, err := os.Stat(filepath.Dir(p)); err != nil {
			host, _ := os.Hostname()
			return fmt.Errorf("checkpoint directory of %s is not visible on %s (%w): the control worker must see the checkpoint storage at the same path as the GPU workers, or all must use one s3:// store", p, host, err)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete checkpoint: %w", err)
		}
		return nil
	}
	key, err := s.key(uri)
	if err != nil {
		return fmt.Errorf("delete checkpoint: %w", err)
	}
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("delete checkpoint %s: %w", uri, err)
	}
	return nil
}

// Siblings lists the blobs beside uri (in its directory, or under its key
// prefix up to the last "/"), as URIs in name order; a missing directory
// gives none. Temporary files of the file store are left out.
func (s *Store) Siblings(ctx context.Context, uri string) ([]string, error) {
	if s.bucket == nil {
		p, err := s.path(uri)
		if err != nil {
			return nil, err
		}
		dir := filepath.Dir(p)
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		var out []string
		for _, e := range entries {
			if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
		return out, nil
	}
	key, err := s.key(uri)
	if err != nil {
		return nil, err
	}
	dir := key[:strings.LastIndex(key, "/")+1]
	it := s.bucket.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	var out []string
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		if !o.IsDir {
			out = append(out, "s3://"+s.name+"/"+o.Key)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Base is the last element of uri: the blob's name.
func Base(uri string) string {
	if strings.HasPrefix(uri, "s3://") {
		return path.Base(uri)
	}
	return filepath.Base(uri)
}

// Sibling is the URI of the blob called name beside uri.
func Sibling(uri, name string) string {
	if strings.HasPrefix(uri, "s3://") {
		return uri[:strings.LastIndex(uri, "/")+1] + name
	}
	return filepath.Join(filepath.Dir(uri), name)
}
