// Package data holds the price files bundled into the dqnflow binary, so that a
// run started with an empty config trains on real data on any host.
//
// The files are byte-identical copies of public hourly data sets; their
// README-*.md files give the source, licence, format and the checks done.
package data

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Prefix marks a data path that names a bundled file instead of a file on disk.
const Prefix = "bundled:"

//go:embed *.csv
var files embed.FS

// Default is the data path used when a config names none.
const Default = Prefix + "USA500IDXUSD_H1.csv"

// IsBundled reports whether path names a bundled file ("bundled:NAME").
func IsBundled(path string) bool { return strings.HasPrefix(path, Prefix) }

// Open returns the contents of the bundled file named by path ("bundled:NAME").
func Open(path string) ([]byte, error) {
	name := strings.TrimPrefix(path, Prefix)
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return nil, fmt.Errorf("bundled data %q: no such file (bundled: %s)", name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Names lists the bundled files.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}
