package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dqnflow/dqnflow/prices"
)

// dataFlags are the flags of every process that reads price data (worker,
// dev and the local commands): its data roots and read limits, which
// prices.NewSource turns into its prices.Source (ADR 0029).
type dataFlags struct {
	roots  rootList
	limits string
}

// addDataFlags registers --data-root and --data-limits on fs.
func addDataFlags(fs *pflag.FlagSet) *dataFlags {
	d := &dataFlags{}
	fs.Var(&d.roots, "data-root", "a directory price files may be read from (repeatable, or a list like $PATH); default $"+prices.EnvDataRoots+", else the working directory")
	fs.StringVar(&d.limits, "data-limits", "", "raise what one price file may cost: bytes=N,line=N,fields=N,bars=N (sizes may end in KiB, MiB, GiB; default "+prices.Limits{}.String()+")")
	return d
}

// source is the flags' prices.Source, with typed, the data paths given on
// this command line, readable wherever they are (prices.Source.Allow).
func (d *dataFlags) source(typed ...string) (prices.Source, error) {
	src, err := prices.NewSource(d.roots, d.limits)
	if err != nil {
		return src, fmt.Errorf("%w: %v", errUsage, err)
	}
	for _, p := range typed {
		if err == nil {
			src, err = src.Allow(p)
		}
	}
	return src, err
}

// rootList is a repeatable flag.
type rootList []string

func (r *rootList) String() string     { return strings.Join(*r, ",") }
func (r *rootList) Set(v string) error { *r = append(*r, v); return nil }
func (r *rootList) Type() string       { return "dirs" }
