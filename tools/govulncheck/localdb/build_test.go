package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testModVersion = "example.com/vulndb@v0.0.0-20261105234957-e22db6528018"

var testDate = time.Date(2026, 11, 5, 23, 49, 57, 0, time.UTC)

// writeModuleZip writes a module zip, its files named module@version/NAME
// as the module proxy serves them, and returns its path.
func writeModuleZip(t *testing.T, dir, modVersion string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(modVersion + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "module.zip")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Entries as the vulndb repository holds them: no dates but a withdrawal.
var (
	stdlibEntry = `{"schema_version":"1.3.1","id":"GO-2026-0001","modified":"0001-01-01T00:00:00Z","aliases":["CVE-2026-1"],
"database_specific":{"url":"https://pkg.go.dev/vuln/GO-2026-0001"},
"affected":[{"package":{"name":"stdlib","ecosystem":"Go"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}]}]}`
	twoModulesEntry = `{"schema_version":"1.3.1","id":"GO-2026-0002","modified":"0001-01-01T00:00:00Z",
"database_specific":{"url":"https://pkg.go.dev/vuln/GO-2026-0002"},
"affected":[{"package":{"name":"example.com/b","ecosystem":"Go"}},{"package":{"name":"example.com/a","ecosystem":"Go"}},{"package":{"name":"example.com/b","ecosystem":"Go"}}]}`
	withdrawnEntry = `{"schema_version":"1.3.1","id":"GO-2026-0010","modified":"0001-01-01T00:00:00Z","withdrawn":"2026-02-01T00:00:00Z",
"database_specific":{"url":"https://pkg.go.dev/vuln/GO-2026-0010"},
"affected":[{"package":{"name":"example.com/a","ecosystem":"Go"}}]}`
)

func TestBuildWritesTheLayoutGovulncheckReads(t *testing.T) {
	tmp := t.TempDir()
	files := map[string]string{
		"data/osv/GO-2026-0010.json":     withdrawnEntry,
		"data/osv/GO-2026-0001.json":     stdlibEntry,
		"data/osv/GO-2026-0002.json":     twoModulesEntry,
		"data/osv/README.md":             "not an entry",
		"data/reports/GO-2026-0003.yaml": "id: GO-2026-0003",
		"go.mod":                         "module example.com/vulndb\n",
	}
	zipPath := writeModuleZip(t, tmp, testModVersion, files)
	dir := filepath.Join(tmp, "db")
	// What a previous build left is replaced, not merged.
	if err := os.MkdirAll(filepath.Join(dir, "ID"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ID", "GO-2000-0001.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}

	s, err := Build(zipPath, testModVersion, testDate, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Entries: 3, Withdrawn: 1, Modules: 3}); s != want {
		t.Errorf("summary %+v, want %+v", s, want)
	}

	const zero = `"modified":"0001-01-01T00:00:00Z"`
	want := map[string]string{
		"index/db.json": `{"modified":"2026-11-05T23:49:57Z"}`,
		// Sorted by path, then id; a module twice in one entry is listed once.
		"index/modules.json": `[` +
			`{"path":"example.com/a","vulns":[{"id":"GO-2026-0002",` + zero + `},{"id":"GO-2026-0010",` + zero + `}]},` +
			`{"path":"example.com/b","vulns":[{"id":"GO-2026-0002",` + zero + `}]},` +
			`{"path":"stdlib","vulns":[{"id":"GO-2026-0001",` + zero + `}]}]`,
		"index/vulns.json": `[{"id":"GO-2026-0001",` + zero + `,"aliases":["CVE-2026-1"]},` +
			`{"id":"GO-2026-0002",` + zero + `},{"id":"GO-2026-0010",` + zero + `}]`,
		"ID/GO-2026-0001.json": stdlibEntry,
		"ID/GO-2026-0002.json": twoModulesEntry,
		"ID/GO-2026-0010.json": withdrawnEntry,
	}
	var got []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("files %v, want the %d of %v", got, len(want), want)
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if string(b) != content {
			t.Errorf("%s:\n%s\nwant\n%s", name, b, content)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, ".db-*")); len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

func TestBuildRefusesABadEntryNamingItsFile(t *testing.T) {
	const url = `"database_specific":{"url":"https://pkg.go.dev/vuln/GO-2026-0001"}`
	for _, tc := range []struct {
		name, file, content string
		want                []string // in the error, besides the file's name
	}{
		{"malformed JSON", "GO-2026-0001.json", `{"id":"GO-2026-0001",,}`, []string{"byte 22", "invalid character ','"}},
		{"wrong type", "GO-2026-0001.json", `{"id":7}`, []string{"byte 7", "cannot unmarshal number"}},
		{"id is not the file name", "GO-2026-0001.json", `{"id":"GO-2026-0009"}`, []string{`id "GO-2026-0009", want "GO-2026-0001"`}},
		{"no database_specific.url", "GO-2026-0001.json", `{"id":"GO-2026-0001","database_specific":{}}`, []string{"no database_specific.url"}},
		{"package without a path", "GO-2026-0001.json", `{"id":"GO-2026-0001",` + url + `,"affected":[{},{"package":{"ecosystem":"Go"}}]}`, []string{"affected[0]", `package ""`}},
		{"another ecosystem", "GO-2026-0001.json", `{"id":"GO-2026-0001",` + url + `,"affected":[{"package":{"name":"left-pad","ecosystem":"npm"}}]}`, []string{"affected[0]", `ecosystem "npm"`}},
		{"not a Go vulnerability's name", "GHSA-xxxx.json", `{"id":"GHSA-xxxx"}`, []string{"GO-YYYY-NNNN.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			zipPath := writeModuleZip(t, tmp, testModVersion, map[string]string{
				"data/osv/GO-2020-0001.json": `{"id":"GO-2020-0001","database_specific":{"url":"https://pkg.go.dev/vuln/GO-2020-0001"}}`,
				"data/osv/" + tc.file:        tc.content,
			})
			dir := filepath.Join(tmp, "db")
			if err := os.MkdirAll(filepath.Join(dir, "index"), 0o755); err != nil {
				t.Fatal(err)
			}
			old := filepath.Join(dir, "index", "db.json")
			if err := os.WriteFile(old, []byte("previous"), 0o644); err != nil {
				t.Fatal(err)
			}

			_, err := Build(zipPath, testModVersion, testDate, dir)
			if err == nil {
				t.Fatal("Build accepted it")
			}
			for _, w := range append(tc.want, zipPath, testModVersion+"/data/osv/"+tc.file) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if b, err := os.ReadFile(old); err != nil || string(b) != "previous" {
				t.Errorf("the previous database was changed: %q, %v", b, err)
			}
		})
	}
}

func TestBuildRefusesAModuleWithoutEntries(t *testing.T) {
	tmp := t.TempDir()
	zipPath := writeModuleZip(t, tmp, testModVersion, map[string]string{"go.mod": "module example.com/vulndb\n"})
	_, err := Build(zipPath, testModVersion, testDate, filepath.Join(tmp, "db"))
	if err == nil || !strings.Contains(err.Error(), "no OSV entries under "+testModVersion+"/data/osv/") {
		t.Fatalf("error %v, want one saying there are no entries", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "db")); !os.IsNotExist(err) {
		t.Errorf("a database was written: %v", err)
	}
}
