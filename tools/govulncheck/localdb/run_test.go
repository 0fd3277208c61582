package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
)

const (
	testModule  = "example.com/vulndb"
	testVersion = "v0.0.0-20261105234957-e22db6528018"
)

// fileProxy serves one version of example.com/vulndb, holding files, from
// a GOPROXY directory, points the go command at it with a module cache of
// the test's own, and returns the zip's h1: hash.
func fileProxy(t *testing.T, files map[string]string) (sum string) {
	t.Helper()
	proxy := t.TempDir()
	v := filepath.Join(proxy, testModule, "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	files["go.mod"] = "module " + testModule + "\n"
	zipPath := writeModuleZip(t, t.TempDir(), testModule+"@"+testVersion, files)
	b, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"list":                testVersion + "\n",
		testVersion + ".info": `{"Version":"` + testVersion + `","Time":"2026-11-05T23:49:57Z"}`,
		testVersion + ".mod":  files["go.mod"],
		testVersion + ".zip":  string(b),
	} {
		if err := os.WriteFile(filepath.Join(v, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err = dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy))
	t.Setenv("GOSUMDB", "off") // the pin is what is checked here
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-modcacherw") // so that the test can remove it
	return sum
}

func testConfig(t *testing.T, sum string, now time.Time) config {
	return config{
		module: testModule, version: testVersion, sum: sum,
		out: filepath.Join(t.TempDir(), "vulndb"), maxAgeDays: 60, goCmd: "go", now: now,
	}
}

func TestRunBuildsThePinnedVersionFromTheProxyAndSaysItsDate(t *testing.T) {
	sum := fileProxy(t, map[string]string{"data/osv/GO-2026-0001.json": stdlibEntry})
	cfg := testConfig(t, sum, testDate.Add(25*24*time.Hour+time.Hour))
	var out bytes.Buffer
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		testModule + "@" + testVersion + " (" + sum + ")",
		"data as of 2026-11-05 23:49:57 UTC, 25 days old",
		"not a live feed",
		"1 entries (0 withdrawn) for 1 modules in " + cfg.out,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output\n%s\ndoes not say %q", out.String(), want)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfg.out, "ID", "GO-2026-0001.json"))
	if err != nil || string(b) != stdlibEntry {
		t.Errorf("ID/GO-2026-0001.json = %q, %v; want the entry", b, err)
	}
}

func TestRunRefusesAZipOtherThanThePinned(t *testing.T) {
	fileProxy(t, map[string]string{"data/osv/GO-2026-0001.json": stdlibEntry})
	const pinned = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	cfg := testConfig(t, pinned, testDate)
	err := run(context.Background(), cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "the pin says "+pinned) {
		t.Fatalf("error %v, want a hash mismatch against the pin", err)
	}
	if _, err := os.Stat(cfg.out); !os.IsNotExist(err) {
		t.Errorf("a database was written: %v", err)
	}
}

func TestRunSaysWhyAVersionCannotBeDownloaded(t *testing.T) {
	sum := fileProxy(t, map[string]string{"data/osv/GO-2026-0001.json": stdlibEntry})
	cfg := testConfig(t, sum, testDate)
	cfg.version = "v0.0.0-20261104000000-000000000000"
	err := run(context.Background(), cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "go mod download "+testModule+"@"+cfg.version) {
		t.Fatalf("error %v, want the go command's failure for the version", err)
	}
}

func TestRunRefusesDataOlderThanTheLimit(t *testing.T) {
	// The age is checked before anything is downloaded: the go command
	// here does not exist.
	cfg := testConfig(t, "h1:unused", testDate.Add(61*24*time.Hour))
	cfg.goCmd = filepath.Join(t.TempDir(), "no-go")
	err := run(context.Background(), cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "is 61 days old, more than the 60 allowed") ||
		!strings.Contains(err.Error(), "VULNDB_MAX_AGE_DAYS=0") {
		t.Fatalf("error %v, want the age, the limit and the way out", err)
	}

	// Without a limit the same data is accepted, and the download is tried.
	cfg.maxAgeDays = 0
	err = run(context.Background(), cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "go mod download") {
		t.Fatalf("error %v, want the download's (no limit on age)", err)
	}
}

func TestThePinIsAPseudoVersionWithAHash(t *testing.T) {
	cfg := config{module: vulndbModule, version: vulndbVersion, sum: vulndbSum,
		out: filepath.Join(t.TempDir(), "db"), goCmd: filepath.Join(t.TempDir(), "no-go"), now: time.Now()}
	err := run(context.Background(), cfg, &bytes.Buffer{})
	// Past the date check, the download of the missing go command fails.
	if err == nil || !strings.Contains(err.Error(), "go mod download "+vulndbModule+"@"+vulndbVersion) {
		t.Fatalf("error %v, want it to reach the download", err)
	}
	if !strings.HasPrefix(vulndbSum, "h1:") || len(vulndbSum) != len("h1:")+44 {
		t.Errorf("pinned sum %q is not an h1: hash", vulndbSum)
	}
}
