package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// verify reads the checkpoint at path with the zero Options and returns
// its Info, as FuzzVerifyDetectsEveryChange checks it.
func verify(path string) (Info, error) {
	_, info, err := Read(context.Background(), path, Options{})
	return info, err
}

// dirNames lists the names in dir, to catch leftover temporary files.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteThenReadRoundTrips checks that Read returns what Write stored,
// that both report the same Info, that Info.SHA256 is the hash of the bytes
// on disk, and that the directory holds only the final file.
func TestWriteThenReadRoundTrips(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	in := mixed()
	wrote, err := Write(path, in, Options{})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if wrote.SHA256 != hexSum(raw) || wrote.Bytes != int64(len(raw)) || wrote.Path != path {
		t.Errorf("Write info = %+v, file has %d bytes, sha256 %s", wrote, len(raw), hexSum(raw))
	}
	out, read, err := Read(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !reflect.DeepEqual(read, wrote) {
		t.Errorf("Read info = %+v, Write info = %+v", read, wrote)
	}
	if !reflect.DeepEqual(out.Meta, in.Meta) || len(out.Tensors) != len(in.Tensors) {
		t.Fatalf("Read returned %d tensors and meta %q", len(out.Tensors), out.Meta)
	}
	if v, err := out.F32("online.s1.weight", 2, 3); err != nil || v[1] != -2 {
		t.Errorf("online.s1.weight = %v, %v", v, err)
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"ck.safetensors"}) {
		t.Errorf("directory holds %v, want only ck.safetensors", names)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("file mode = %v, %v; want 0644", st.Mode().Perm(), err)
	}
	if _, _, err := ReadVerified(t.Context(), path, strings.ToUpper(wrote.SHA256), Options{}); err != nil {
		t.Errorf("ReadVerified with the recorded hash (upper case): %v", err)
	}
}

// TestWriteReplacesTheOldFileWhole checks that a second Write over the same
// path leaves exactly the second checkpoint.
func TestWriteReplacesTheOldFileWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if _, err := Write(path, mixed(), Options{}); err != nil {
		t.Fatal(err)
	}
	second, err := Write(path, tiny(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ck, info, err := Read(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Read after the second Write: %v", err)
	}
	if info.SHA256 != second.SHA256 || len(ck.Tensors) != 3 {
		t.Errorf("file holds %d tensors with sha256 %s, want the second checkpoint %s", len(ck.Tensors), info.SHA256, second.SHA256)
	}
}

// TestWriteFailureLeavesNothingBehind checks the failure paths: an invalid
// checkpoint creates no file at all, and a failed rename (the target is a
// directory) removes the temporary file.
func TestWriteFailureLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.safetensors")
	bad := &Checkpoint{Tensors: []Tensor{F32Tensor("w", []int{3}, []float32{1})}}
	if _, err := Write(path, bad, Options{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Write of an invalid checkpoint: error = %v, want one naming %s", err, path)
	}
	blocked := filepath.Join(dir, "blocked")
	if err := os.Mkdir(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(blocked, tiny(), Options{}); err == nil || !strings.Contains(err.Error(), blocked) {
		t.Errorf("Write over a directory: error = %v, want one naming %s", err, blocked)
	}
	if _, err := Write(filepath.Join(dir, "missing", "ck.safetensors"), tiny(), Options{}); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"blocked"}) {
		t.Errorf("directory holds %v after failed writes, want only the blocking directory", names)
	}
}

// TestReadNamesTheFileOfEveryCorruption damages a written file in the
// header, the data and the length, truncates it, and checks that Read
// and ReadVerified both fail with ErrCorrupt and the file's name.
func TestReadNamesTheFileOfEveryCorruption(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	info, err := Write(good, mixed(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(good)
	damage := map[string]func([]byte) []byte{
		"length":    func(b []byte) []byte { b[0] ^= 0x08; return b },
		"header":    func(b []byte) []byte { b[40] ^= 0x01; return b },
		"padding":   func(b []byte) []byte { b[8+int(b[0])+int(b[1])<<8-1] = '\n'; return b },
		"last byte": func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-1] },
		"empty":     func(b []byte) []byte { return nil },
	}
	for name, f := range damage {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".safetensors")
		if err := os.WriteFile(path, f(append([]byte(nil), raw...)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, rerr := Read(t.Context(), path, Options{})
		_, _, werr := ReadVerified(t.Context(), path, info.SHA256, Options{})
		for fn, err := range map[string]error{"Read": rerr, "ReadVerified": werr} {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Errorf("%s damage, %s: error = %v, want ErrCorrupt naming %s", name, fn, err, path)
			}
		}
	}
}

// TestReadVerifiedComparesTheRecordedHash checks that an intact file whose
// hash differs from the recorded one (say, a stale blob under the same
// name) is rejected, and that a malformed recorded hash is a caller error.
func TestReadVerifiedComparesTheRecordedHash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	first, err := Write(path, tiny(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(path, mixed(), Options{}); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReadVerified(t.Context(), path, first.SHA256, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), first.SHA256) {
		t.Errorf("ReadVerified with a stale hash: error = %v, want ErrCorrupt naming the recorded hash", err)
	}
	_, _, err = ReadVerified(t.Context(), path, "abc", Options{})
	if err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadVerified with a malformed hash: error = %v, want a non-corruption error", err)
	}
}

// TestReadMissingFileIsNotExist checks that a missing file is reported as
// such, not as corruption.
func TestReadMissingFileIsNotExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.safetensors")
	_, _, err := Read(t.Context(), path, Options{})
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Read of a missing file: error = %v, want fs.ErrNotExist naming %s", err, path)
	}
}
