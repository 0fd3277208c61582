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
)

// TestWriteHookSeesEachPointOfTheWrite checks what a directory store's
// write has done at each WritePoint, where the fault-injection tests kill
// a worker: at TempSynced the temporary file holds the whole checkpoint
// (the bytes the final file gets) and the final name does not exist; at
// Renamed the final file is complete and no temporary file is left. An
// error from the hook ends the write there: before the rename nothing is
// left, after it the complete file stays and Write reports the error.
func TestWriteHookSeesEachPointOfTheWrite(t *testing.T) {
	root := t.TempDir()
	st := Local(root)
	uri, err := st.Locate("run/epoch-000001.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(uri)
	var points []WritePoint
	var tempBytes []byte
	st.Hook = func(ctx context.Context, at WritePoint, file string) error {
		points = append(points, at)
		names := dirNames(t, dir)
		switch at {
		case TempSynced:
			if filepath.Dir(file) != dir || !strings.HasPrefix(filepath.Base(file), ".epoch-000001.safetensors.tmp-") {
				t.Errorf("at %s the hook got %s, want the temporary file beside %s", at, file, uri)
			}
			if !reflect.DeepEqual(names, []string{filepath.Base(file)}) {
				t.Errorf("at %s the directory holds %v, want only the temporary file", at, names)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tempBytes = b
		case Renamed:
			if file != uri || !reflect.DeepEqual(names, []string{"epoch-000001.safetensors"}) {
				t.Errorf("at %s the hook got %s and the directory holds %v, want %s alone", at, file, names, uri)
			}
			if _, _, err := Read(context.Background(), file, Options{}); err != nil {
				t.Errorf("at %s the file does not verify: %v", at, err)
			}
		}
		return nil
	}
	info, err := st.Write(context.Background(), uri, mixed())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(points, []WritePoint{TempSynced, Renamed}) {
		t.Fatalf("the hook was called at %v, want %v", points, []WritePoint{TempSynced, Renamed})
	}
	final, err := os.ReadFile(uri)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tempBytes, final) || info.SHA256 != hexSum(final) {
		t.Fatalf("at %s the temporary file had %d bytes, the final file has %d (sha256 %s, Write says %s)",
			TempSynced, len(tempBytes), len(final), hexSum(final), info.SHA256)
	}

	stop := errors.New("stopped by the hook")
	for _, at := range []WritePoint{TempSynced, Renamed} {
		t.Run(string(at), func(t *testing.T) {
			st := Local(t.TempDir())
			uri, err := st.Locate("run/epoch-000002.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			st.Hook = func(_ context.Context, p WritePoint, _ string) error {
				if p == at {
					return stop
				}
				return nil
			}
			_, err = st.Write(context.Background(), uri, mixed())
			if !errors.Is(err, stop) || !strings.Contains(err.Error(), uri) {
				t.Fatalf("Write with the hook failing at %s: %v; want the hook's error, naming %s", at, err, uri)
			}
			names := dirNames(t, filepath.Dir(uri))
			if at == TempSynced {
				if len(names) != 0 {
					t.Fatalf("a write stopped at %s left %v", at, names)
				}
				if _, err := os.Stat(uri); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("a write stopped at %s: %s exists (%v)", at, uri, err)
				}
				return
			}
			if !reflect.DeepEqual(names, []string{"epoch-000002.safetensors"}) {
				t.Fatalf("a write stopped at %s left %v, want the complete file alone", at, names)
			}
			if _, _, err := Read(context.Background(), uri, Options{}); err != nil {
				t.Fatalf("a write stopped at %s: %v", at, err)
			}
		})
	}
}
