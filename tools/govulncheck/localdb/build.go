package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The database layout govulncheck reads from a directory (its
// internal/client package, v1 schema; vuln.go.dev serves the same paths
// with .json.gz, which a local directory does not need):
//
//	index/db.json       {"modified": T}, T the time of the newest data
//	index/modules.json  [{"path": M, "vulns": [{"id", "modified", "fixed"}]}], sorted by path, then id
//	index/vulns.json    [{"id", "modified", "aliases"}], sorted by id
//	ID/<id>.json        the OSV entry
//
// govulncheck decides that the directory has this layout by finding
// index/modules.json, then reads index/db.json for the date and
// index/modules.json to know which entries concern the modules it found;
// index/vulns.json completes the layout for other readers.
const (
	indexDir = "index"
	idDir    = "ID"
)

// osvDir is where the vulndb module holds the OSV entries it publishes,
// one <id>.json per vulnerability.
const osvDir = "data/osv/"

// entryName is the file name of a Go vulnerability's OSV entry.
var entryName = regexp.MustCompile(`^GO-[0-9]{4}-[0-9]{4,}\.json$`)

// entry holds the fields of an OSV entry (ossf.github.io/osv-schema) that
// the indexes need; the entry itself is copied byte for byte.
type entry struct {
	ID        string     `json:"id"`
	Modified  time.Time  `json:"modified"`
	Aliases   []string   `json:"aliases"`
	Withdrawn *time.Time `json:"withdrawn"`
	// DatabaseSpecific.URL is the entry's page; govulncheck (v1.9.0)
	// dereferences database_specific when it reports the entry in text
	// mode, and crashes where it is absent.
	DatabaseSpecific *struct {
		URL string `json:"url"`
	} `json:"database_specific"`
	Affected []struct {
		Package struct {
			Name      string `json:"name"`
			Ecosystem string `json:"ecosystem"`
		} `json:"package"`
	} `json:"affected"`
}

type dbMeta struct {
	Modified time.Time `json:"modified"`
}

type moduleMeta struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

// moduleVuln leaves out the index's "fixed" field on purpose. govulncheck
// uses it only to skip reading entries whose fix is older than the
// version it found; an absent one makes it read every entry of the module
// and decide from the entry's own ranges. A "fixed" computed here would be
// a second implementation of govulncheck's semver rules, and an error in it
// would hide a vulnerability without a trace.
type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
}

type vulnMeta struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
}

// Summary describes a database Build wrote.
type Summary struct {
	Entries   int // OSV entries
	Withdrawn int // entries marked withdrawn (govulncheck ignores them)
	Modules   int // modules (and "stdlib", "toolchain") the entries concern
}

// Build writes the database of the OSV entries under data/osv/ in the
// module zip zipPath (whose files are named module@version/...) to dir,
// replacing what dir held. modified is the date the database gives as its
// own: the entries in the repository carry none (their "modified" is the
// zero time, filled from git history only when vuln.go.dev is generated),
// so the caller passes the commit time of the module version.
//
// Build refuses, naming the file, an entry that is not valid JSON, whose
// id is not its file name, that has no database_specific.url, or that
// names a package without its path or outside the Go ecosystem. Nothing is written to dir unless every entry
// passes.
func Build(zipPath, modVersion string, modified time.Time, dir string) (Summary, error) {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return Summary{}, fmt.Errorf("open %s: %w", zipPath, err)
	}
	defer zr.Close()

	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Summary{}, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+"-")
	if err != nil {
		return Summary{}, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed into place
	for _, d := range []string{indexDir, idDir} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return Summary{}, err
		}
	}

	prefix := modVersion + "/" + osvDir
	var (
		sum     Summary
		vulns   []vulnMeta
		modules = map[string]*moduleMeta{}
	)
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || strings.Contains(name, "/") || path.Ext(name) != ".json" {
			continue
		}
		where := zipPath + ": " + f.Name
		if !entryName.MatchString(name) {
			return Summary{}, fmt.Errorf("%s: not a Go vulnerability's file name (GO-YYYY-NNNN.json)", where)
		}
		raw, err := readZipFile(f)
		if err != nil {
			return Summary{}, fmt.Errorf("%s: %w", where, err)
		}
		e, err := parseEntry(raw)
		if err != nil {
			return Summary{}, fmt.Errorf("%s: %w", where, err)
		}
		if want := strings.TrimSuffix(name, ".json"); e.ID != want {
			return Summary{}, fmt.Errorf("%s: id %q, want %q (the file name)", where, e.ID, want)
		}
		if e.DatabaseSpecific == nil || e.DatabaseSpecific.URL == "" {
			return Summary{}, fmt.Errorf("%s: no database_specific.url (govulncheck needs it to report the entry)", where)
		}

		sum.Entries++
		if e.Withdrawn != nil {
			sum.Withdrawn++
		}
		vulns = append(vulns, vulnMeta{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		seen := map[string]bool{}
		for i, a := range e.Affected {
			p := a.Package
			if p.Name == "" || p.Ecosystem != "Go" {
				return Summary{}, fmt.Errorf("%s: affected[%d]: package %q in ecosystem %q, want a module path in \"Go\"", where, i, p.Name, p.Ecosystem)
			}
			if seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			m := modules[p.Name]
			if m == nil {
				m = &moduleMeta{Path: p.Name}
				modules[p.Name] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
		}
		if err := os.WriteFile(filepath.Join(tmp, idDir, name), raw, 0o644); err != nil {
			return Summary{}, err
		}
	}
	if sum.Entries == 0 {
		return Summary{}, fmt.Errorf("%s: no OSV entries under %s", zipPath, prefix)
	}

	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })
	index := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		sort.Slice(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		index = append(index, m)
	}
	sort.Slice(index, func(i, j int) bool { return index[i].Path < index[j].Path })
	sum.Modules = len(index)

	for name, v := range map[string]any{
		"db.json":      dbMeta{Modified: modified.UTC()},
		"modules.json": index,
		"vulns.json":   vulns,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return Summary{}, err
		}
		if err := os.WriteFile(filepath.Join(tmp, indexDir, name), b, 0o644); err != nil {
			return Summary{}, err
		}
	}

	if err := os.RemoveAll(dir); err != nil {
		return Summary{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Summary{}, err
	}
	return sum, nil
}

// maxEntrySize bounds one OSV entry; the largest in the repository is a
// few hundred kilobytes.
const maxEntrySize = 16 << 20

func readZipFile(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > maxEntrySize {
		return nil, fmt.Errorf("%d bytes, more than the %d an OSV entry may have", f.UncompressedSize64, maxEntrySize)
	}
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, maxEntrySize))
}

// parseEntry decodes an OSV entry; a syntax or type error says at which
// byte it is.
func parseEntry(raw []byte) (entry, error) {
	var e entry
	err := json.Unmarshal(raw, &e)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return e, fmt.Errorf("byte %d: %w", se.Offset, err)
	case errors.As(err, &te):
		return e, fmt.Errorf("byte %d: %w", te.Offset, err)
	case err != nil:
		return e, err
	}
	return e, nil
}
