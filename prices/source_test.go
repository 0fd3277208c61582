package prices

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
)

// priceFile is a valid price file whose header carries marker, which no
// error may repeat.
func priceFile(t *testing.T, path, marker string) string {
	t.Helper()
	s := "time,open,high,low,close," + marker + "\n2024-01-01 00:00:00,1,2,1,1,0\n2024-01-01 01:00:00,1,2,1,2,0\n"
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSourceReadsOnlyInsideItsRoots: a price file outside the data roots
// (an absolute path elsewhere, "..", a link inside a root that points out)
// is refused with its path, the roots and how to add one, and none of its
// content, though it is a valid price file; Allow makes one such file
// readable (a path typed on the command line); files inside are read.
// Before, data.path opened any file the worker could (issue 43).
func TestSourceReadsOnlyInsideItsRoots(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	good := priceFile(t, filepath.Join(root, "good.csv"), "volume")
	secret := priceFile(t, filepath.Join(outside, "secret.csv"), "MARKER")
	if err := os.Symlink(secret, filepath.Join(root, "link.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	roots, err := files.NewRoots(root)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Roots: roots}
	ctx := context.Background()
	for _, p := range []string{good, "good.csv"} {
		if b, err := src.Bars(ctx, p); err != nil || b.Len() != 2 {
			t.Errorf("Bars(%s) inside the root: %v", p, err)
		}
	}
	for _, p := range []string{secret, "../outside/secret.csv", filepath.Join(root, "..", "outside", "secret.csv"), "link.csv", "dirlink/secret.csv"} {
		_, err := src.Bars(ctx, p)
		if !errors.Is(err, files.ErrOutsideRoot) {
			t.Errorf("Bars(%s): %v, want files.ErrOutsideRoot", p, err)
			continue
		}
		for _, want := range []string{"data path " + p, root, "--data-root", EnvDataRoots} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Bars(%s): %q does not say %q", p, err, want)
			}
		}
		if strings.Contains(err.Error(), "MARKER") {
			t.Errorf("Bars(%s): the error repeats the file: %v", p, err)
		}
	}
	typed, err := src.Allow(secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := typed.Bars(ctx, secret); err != nil {
		t.Errorf("a file allowed by name: %v", err)
	}
	if _, err := typed.Bars(ctx, filepath.Join(outside, "other.csv")); !errors.Is(err, files.ErrOutsideRoot) {
		t.Errorf("a file beside the one allowed: %v, want files.ErrOutsideRoot", err)
	}
	if _, err := src.Bars(ctx, secret); !errors.Is(err, files.ErrOutsideRoot) {
		t.Errorf("Allow changed the Source it was called on: %v", err)
	}
}

// TestSourceReadsOnlyRegularFiles: with /dev and /proc/self made data
// roots, /dev/zero is refused as a character device before a byte is read,
// /proc/self/environ as a file that holds more than its size says, and a
// directory as one. Before, data.path=/dev/zero grew to 23.9 GB until the
// kernel killed the worker (issue 43).
func TestSourceReadsOnlyRegularFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/dev/zero and /proc are Linux's")
	}
	roots, err := files.NewRoots("/dev", "/proc/self", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Roots: roots}
	for p, want := range map[string]string{
		"/dev/zero":          "a character device",
		"/proc/self/environ": "holds data",
		roots.List()[2]:      "a directory",
	} {
		var err error
		alloc, took := measure(func() { _, err = src.Bars(context.Background(), p) })
		if !errors.Is(err, files.ErrNotRegular) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("Bars(%s): %v, want files.ErrNotRegular: %s", p, err, want)
		}
		t.Logf("%s: refused in %v, %d KiB allocated: %v", p, took, alloc>>10, err)
		if alloc > 1<<20 {
			t.Errorf("%s: %d bytes allocated to refuse it", p, alloc)
		}
	}
}

// TestNewSourceTakesFlagsThenTheEnvironmentThenTheWorkingDirectory checks
// where a process's data roots come from, and that a root that is not a
// directory and bad limits are errors naming where they came from.
func TestNewSourceTakesFlagsThenTheEnvironmentThenTheWorkingDirectory(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	sep := string(os.PathListSeparator)
	t.Setenv(EnvDataRoots, a+sep+b)
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{a, b}},
		{[]string{c}, []string{c}},
		{[]string{c + sep + a, b}, []string{c, a, b}},
	} {
		s, err := NewSource(tc.flags, "")
		if err != nil || strings.Join(s.Roots.List(), sep) != strings.Join(tc.want, sep) {
			t.Errorf("flags %q: roots %v, %v; want %v", tc.flags, s.Roots.List(), err, tc.want)
		}
	}
	t.Setenv(EnvDataRoots, "")
	t.Chdir(c)
	if s, err := NewSource(nil, ""); err != nil || strings.Join(s.Roots.List(), sep) != c {
		t.Errorf("no flag, no environment: roots %v, %v; want the working directory %s", s.Roots.List(), err, c)
	}
	if _, err := NewSource([]string{filepath.Join(a, "missing")}, ""); err == nil || !strings.Contains(err.Error(), "--data-root") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing root: %v", err)
	}
	t.Setenv(EnvDataRoots, filepath.Join(a, "nope"))
	if _, err := NewSource(nil, ""); err == nil || !strings.Contains(err.Error(), EnvDataRoots) {
		t.Errorf("a missing root in the environment: %v", err)
	}
	if _, err := NewSource([]string{a}, "lines=5"); err == nil || !strings.Contains(err.Error(), "--data-limits") || !strings.Contains(err.Error(), `unknown key "lines"`) {
		t.Errorf("bad limits: %v", err)
	}
}

// TestParseLimitsReadsWhatStringWrites: the limits' own form reads back,
// sizes may carry a unit, and a bad key or value is named.
func TestParseLimitsReadsWhatStringWrites(t *testing.T) {
	l, err := ParseLimits("bytes=2GiB, line=1MiB,fields=512,bars=5000000")
	if err != nil || l != (Limits{MaxBytes: 2 << 30, MaxLineBytes: 1 << 20, MaxFields: 512, MaxBars: 5_000_000}) {
		t.Fatalf("ParseLimits = %+v, %v", l, err)
	}
	if back, err := ParseLimits(l.String()); err != nil || back != l {
		t.Errorf("ParseLimits(%q) = %+v, %v", l.String(), back, err)
	}
	if d, err := ParseLimits(""); err != nil || d.withDefaults() != (Limits{DefaultMaxBytes, DefaultMaxLineBytes, DefaultMaxFields, DefaultMaxBars}) {
		t.Errorf("ParseLimits(\"\") = %+v, %v; want the defaults", d, err)
	}
	for in, want := range map[string]string{"bytes=0": "bytes", "line=-1": "line", "bars=x": "bars", "rows=5": "unknown key", "bytes": "KEY=N", "bytes=3TiB": "bytes"} {
		if _, err := ParseLimits(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLimits(%q) = %v, want an error naming %q", in, err, want)
		}
	}
}

// TestCheckRefusesAnUnreadableDataPathByItsField: Check, which runs before
// any training, names the config field and the reason for a file outside
// the roots, a device, UTF-16 text, a NUL byte near the start and an
// unknown bundled name, and passes a good file, a bundled one and the
// synthetic series.
func TestCheckRefusesAnUnreadableDataPathByItsField(t *testing.T) {
	root := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := priceFile(t, filepath.Join(root, "good.csv"), "volume")
	utf16 := write("utf16.csv", []byte("\xff\xfet\x00i\x00m\x00e\x00"))
	nul := write("nul.csv", []byte("time,open\nx\x00y\n"))
	dirs := []string{root}
	cases := map[string]string{
		good: "", "bundled:bitcoin_2024.csv": "", SyntheticPath: "",
		filepath.Join(t.TempDir(), "elsewhere.csv"): "outside",
		utf16:                      "UTF-16 (little-endian) text",
		nul:                        ":2: a NUL byte at byte 2",
		"bundled:no-such-file.csv": "no such file",
	}
	if runtime.GOOS == "linux" {
		dirs = append(dirs, "/dev", "/proc/self")
		cases["/dev/zero"], cases["/proc/self/environ"] = "a character device", "holds data"
	}
	roots, err := files.NewRoots(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Roots: roots}
	cfg := config.Defaults()
	for path, want := range cases {
		cfg.Data.Path = path
		err := src.Check(cfg)
		switch {
		case want == "" && err != nil:
			t.Errorf("Check(%s): %v", path, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), "config data.path: ") || !strings.Contains(err.Error(), want)):
			t.Errorf("Check(%s): %v, want config data.path: ...%s", path, err, want)
		}
	}
}
