package prices

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dqnflow/dqnflow/data"
)

// SeriesSpec is one series of a panel (data.series) or a walk-forward study: its name (the file's symbol),
// its price file and the env.instrument that trades it ("" the config's).
type SeriesSpec struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Instrument string `json:"instrument,omitempty"`
}

// ParseSeries reads a list of series as data.series writes it: entries
// separated by commas or newlines, each a path or a glob of price files
// (or "bundled:NAME"), optionally followed by "=INSTRUMENT" for every
// file it names. Globs expand in lexical order; a series' name is its
// file name without the extension ("EURUSD_H4"). An entry that matches
// nothing, a bad glob or two files of the same name are errors naming the
// entry.
func ParseSeries(spec string) ([]SeriesSpec, error) {
	var out []SeriesSpec
	seen := map[string]string{}
	for i, e := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '\n' }) {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		pat, inst, _ := strings.Cut(e, "=")
		pat, inst = strings.TrimSpace(pat), strings.TrimSpace(inst)
		paths := []string{pat}
		if !data.IsBundled(pat) && pat != SyntheticPath {
			m, err := filepath.Glob(pat)
			if err != nil {
				return nil, fmt.Errorf("series entry %d %q: %v", i+1, e, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("series entry %d %q: no file matches %q", i+1, e, pat)
			}
			slices.Sort(m)
			paths = m
		}
		for _, p := range paths {
			name := strings.TrimSuffix(filepath.Base(strings.TrimPrefix(p, data.Prefix)), filepath.Ext(p))
			if prev, dup := seen[name]; dup {
				if prev == p {
					continue
				}
				return nil, fmt.Errorf("series entry %d %q: %s and %s are both named %q", i+1, e, prev, p, name)
			}
			seen[name] = p
			out = append(out, SeriesSpec{Name: name, Path: p, Instrument: inst})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("series %q: no entries", spec)
	}
	return out, nil
}
