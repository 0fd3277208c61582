package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dqnflow/dqnflow/checkpoint/bucket"
	"github.com/dqnflow/dqnflow/checkpoint/s3test"
)

// stores opens one store of each kind for the test: a directory, and a
// bucket prefix of a real S3 server (versitygw), with the server.
func stores(t *testing.T) (map[string]*Store, *s3test.Server) {
	t.Helper()
	srv := s3test.Start(t)
	srv.SetEnv(t)
	dir := t.TempDir()
	file, err := OpenStore(context.Background(), "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := OpenStore(context.Background(), srv.URL("team/a"), Options{Buckets: bucket.OpenS3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obj.Close() })
	return map[string]*Store{"file": file, "s3": obj}, srv
}

// TestStoreRoundTripsVerifiesListsAndDeletes writes a checkpoint to each
// kind of store and checks that Read returns it with the Info Write
// reported, that a wrong recorded hash is ErrCorrupt, that Siblings lists
// exactly the blobs of its directory, and that Delete removes the blob
// (twice is fine) after which Read says it does not exist.
func TestStoreRoundTripsVerifiesListsAndDeletes(t *testing.T) {
	all, _ := stores(t)
	ctx := context.Background()
	for name, s := range all {
		t.Run(name, func(t *testing.T) {
			uri, err := s.Locate("checkpoints/run-1/exec/epoch-000002.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			other, _ := s.Locate("checkpoints/run-1/exec/epoch-000001.safetensors")
			elsewhere, _ := s.Locate("checkpoints/run-2/exec/epoch-000001.safetensors")
			in := mixed()
			wrote, err := s.Write(ctx, uri, in)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			for _, u := range []string{other, elsewhere} {
				if _, err := s.Write(ctx, u, tiny()); err != nil {
					t.Fatalf("Write %s: %v", u, err)
				}
			}
			out, read, err := s.Read(ctx, uri, strings.ToUpper(wrote.SHA256))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			read.Meta, wrote.Meta = nil, nil
			if !reflect.DeepEqual(read, wrote) || !reflect.DeepEqual(out.Meta, in.Meta) || len(out.Tensors) != len(in.Tensors) {
				t.Errorf("Read info %+v, want %+v (%d tensors)", read, wrote, len(out.Tensors))
			}
			if _, _, err := s.Read(ctx, uri, strings.Repeat("ab", 32)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), uri) {
				t.Errorf("Read with another recorded hash: %v, want ErrCorrupt naming %s", err, uri)
			}
			sib, err := s.Siblings(ctx, uri)
			if want := []string{other, uri}; err != nil || !reflect.DeepEqual(sib, want) {
				t.Errorf("Siblings = %q, %v; want %q", sib, err, want)
			}
			if Sibling(uri, "epoch-000001.safetensors") != other || Base(uri) != "epoch-000002.safetensors" {
				t.Errorf("Sibling/Base of %s: %s, %s", uri, Sibling(uri, "epoch-000001.safetensors"), Base(uri))
			}
			for range 2 {
				if err := s.Delete(ctx, uri); err != nil {
					t.Fatalf("Delete: %v", err)
				}
			}
			if _, _, err := s.Read(ctx, uri, ""); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Read after Delete: %v, want fs.ErrNotExist", err)
			}
		})
	}
}

// TestS3ReadRefusesAnObjectChangedOnTheServer damages an object where it
// lies (one byte of the file the posix backend serves) and replaces
// another with a different, well-formed checkpoint: Read refuses both as
// ErrCorrupt, naming the object.
func TestS3ReadRefusesAnObjectChangedOnTheServer(t *testing.T) {
	all, srv := stores(t)
	s, ctx := all["s3"], context.Background()
	flipped, _ := s.Locate("c/flipped.safetensors")
	swapped, _ := s.Locate("c/swapped.safetensors")
	var infos []Info
	for _, u := range []string{flipped, swapped} {
		info, err := s.Write(ctx, u, mixed())
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	file := filepath.Join(srv.Dir, srv.Bucket, "team", "a", "c", "flipped.safetensors")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the posix backend keeps the object at %s: %v", file, err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(srv.Bucket), Key: aws.String("team/a/c/swapped.safetensors"), Body: bytes.NewReader(encodeBytes(t, tiny())),
	}); err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{flipped, swapped} {
		if _, _, err := s.Read(ctx, u, infos[i].SHA256); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), u) {
			t.Errorf("Read %s after the change: %v, want ErrCorrupt naming it", u, err)
		}
	}
}

// TestS3CancelledWriteKeepsTheOldObject starts a write whose context is
// already cancelled over an existing object: the write fails and the old
// object is still there, whole.
func TestS3CancelledWriteKeepsTheOldObject(t *testing.T) {
	all, _ := stores(t)
	s := all["s3"]
	uri, _ := s.Locate("c/epoch-000001.safetensors")
	old, err := s.Write(context.Background(), uri, tiny())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Write(ctx, uri, mixed()); err == nil {
		t.Fatal("a write with a cancelled context succeeded")
	}
	if _, info, err := s.Read(context.Background(), uri, old.SHA256); err != nil || info.Bytes != old.Bytes {
		t.Errorf("the old object after a cancelled write: %+v, %v", info, err)
	}
}

// TestStoreRefusesBlobsOutsideItself checks that no URI leads out of a
// store: "..", empty elements and absolute paths in an object store, URIs
// of another bucket or prefix, and (as Confine tests in detail) paths out
// of a file store's root.
func TestStoreRefusesBlobsOutsideItself(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	obj, err := OpenStore(ctx, "s3://bucket/pre?region=us-east-1&endpoint=http://127.0.0.1:1&use_path_style=true", Options{Buckets: bucket.OpenS3})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	for _, rel := range []string{"../x", "a/../../x", "/abs/x", "a//b", "./a"} {
		if u, err := obj.Locate(rel); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("s3 Locate(%q) = %q, %v; want ErrOutsideRoot", rel, u, err)
		}
	}
	if u, err := obj.Locate("runs/r/epoch-000001.safetensors"); err != nil || u != "s3://bucket/pre/runs/r/epoch-000001.safetensors" {
		t.Errorf("s3 Locate = %q, %v", u, err)
	}
	for _, uri := range []string{"s3://other/pre/x", "s3://bucket/prefix2/x", "s3://bucket/pre/../x", "/etc/passwd", "s3://bucket/pre/"} {
		if _, _, err := obj.Read(ctx, uri, ""); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("s3 Read(%q): %v, want ErrOutsideRoot", uri, err)
		}
		if err := obj.Delete(ctx, uri); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("s3 Delete(%q): %v, want ErrOutsideRoot", uri, err)
		}
	}
	root := t.TempDir()
	file := Local(root)
	for _, uri := range []string{"../x", "/etc/passwd", "s3://bucket/pre/x"} {
		if _, err := file.Write(ctx, uri, tiny()); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("file Write(%q): %v, want ErrOutsideRoot", uri, err)
		}
		if err := file.Delete(ctx, uri); !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("file Delete(%q): %v, want ErrOutsideRoot", uri, err)
		}
	}
}

// TestOpenStoreNamesWhatIsWrong checks the errors for URLs that name no
// store, and that a URL carrying credentials is refused without repeating
// the secret.
func TestOpenStoreNamesWhatIsWrong(t *testing.T) {
	cases := []struct{ url, want string }{
		{"s3://AKIAEXAMPLE:hunter2@bucket/p", "carries credentials"},
		{"s3:///p", "no bucket"},
		{"gs://bucket/p", `scheme "gs" is not supported`},
		{"file://otherhost/dir", "not host"},
		{"s3://bucket/a/../b", "prefix"},
	}
	for _, c := range cases {
		_, err := OpenStore(context.Background(), c.url, Options{Buckets: bucket.OpenS3})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenStore(%q) = %v, want an error containing %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenStore(%q) repeats the secret: %v", c.url, err)
		}
	}
	s, err := OpenStore(context.Background(), "relative/dir", Options{})
	if err != nil || s.Remote() || s.String() != "relative/dir" {
		t.Errorf("a plain directory: %v, %v", s, err)
	}
}

// TestS3LargeCheckpointRoundTrips writes a checkpoint larger than the AWS
// SDK's multipart threshold (16 MiB, parts of 8 MiB), so that it goes up
// as a multipart upload, and reads it back whole with its recorded hash.
func TestS3LargeCheckpointRoundTrips(t *testing.T) {
	all, _ := stores(t)
	s, ctx := all["s3"], context.Background()
	uri, _ := s.Locate("c/large.safetensors")
	big := make([]byte, 40<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	in := &Checkpoint{Meta: map[string]string{}, Tensors: []Tensor{U8Tensor("replay.big", []int{len(big)}, big)}}
	wrote, err := s.Write(ctx, uri, in)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := s.key(uri)
	attrs, err := s.bucket.Attributes(ctx, key)
	if err != nil || !strings.Contains(attrs.ETag, "-") {
		t.Fatalf("object %s: ETag %q (%v); a multipart upload's ETag ends in -<parts>", uri, attrs.ETag, err)
	}
	t.Logf("%d bytes uploaded in parts: ETag %s", wrote.Bytes, attrs.ETag)
	out, read, err := s.Read(ctx, uri, wrote.SHA256)
	if err != nil || read.Bytes != wrote.Bytes || read.Bytes < int64(len(big)) {
		t.Fatalf("Read: %+v, %v; wrote %d bytes", read, err, wrote.Bytes)
	}
	if got, ok := out.Find("replay.big"); !ok || !bytes.Equal(got.Data, big) {
		t.Fatal("the large tensor did not come back intact")
	}
}

// TestSignedStoresRefuseUnsignedAndForeignBlobs: in a directory store and
// in an S3 bucket (versitygw), a store opened with a private key signs
// what it writes and reads it back (Info.SignedBy); opened with the same
// key it refuses a blob written without one, and opened with another key
// it refuses the signed blob: ErrSignature and ErrCorrupt, naming the URI.
func TestSignedStoresRefuseUnsignedAndForeignBlobs(t *testing.T) {
	all, _ := stores(t)
	priv, _ := keyPair(t)
	other, _ := keyPair(t)
	ctx := t.Context()
	for name, plain := range all {
		t.Run(name, func(t *testing.T) {
			open := func(k *Keys) *Store {
				s, err := OpenStore(ctx, plain.String(), Options{Keys: k, Buckets: bucket.OpenS3})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			signed, foreign := open(priv), open(other)
			uri, _ := signed.Locate("runs/r/epoch-000001.safetensors")
			bare, _ := signed.Locate("runs/r/epoch-000002.safetensors")
			wrote, err := signed.Write(ctx, uri, mixed())
			if err != nil || wrote.SignedBy != priv.ID() {
				t.Fatalf("signed Write: %+v, %v", wrote, err)
			}
			if _, err := plain.Write(ctx, bare, mixed()); err != nil {
				t.Fatal(err)
			}
			if _, info, err := signed.Read(ctx, uri, wrote.SHA256); err != nil || info.SignedBy != priv.ID() {
				t.Errorf("signed Read: %+v, %v", info, err)
			}
			for _, c := range []struct {
				what, uri string
				err       error
			}{
				{"unsigned blob, keyed store", bare, second(signed.Read(ctx, bare, ""))},
				{"signed blob, another key", uri, second(foreign.Read(ctx, uri, wrote.SHA256))},
			} {
				if !errors.Is(c.err, ErrSignature) || !errors.Is(c.err, ErrCorrupt) || !strings.Contains(c.err.Error(), c.uri) {
					t.Errorf("%s: %v; want ErrSignature and ErrCorrupt naming %s", c.what, c.err, c.uri)
				}
			}
		})
	}
}

// second is the error of a Read.
func second(_ *Checkpoint, _ Info, err error) error { return err }
