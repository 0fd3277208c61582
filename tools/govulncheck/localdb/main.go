// Command localdb builds the Go vulnerability database that `make
// vulncheck` gives govulncheck (-db file:///DIR), from the OSV entries of
// one pinned version of the golang.org/x/vulndb module (pin.go), fetched
// through the Go module proxy like any dependency.
//
// vuln.go.dev, govulncheck's default database, is generated from that
// repository; machines that cannot reach it can still reach the module
// proxy. The database is a snapshot at the commit the version names, not a
// live feed: localdb prints its date and age, and refuses data older than
// -max-age-days, so that a forgotten pin fails the check instead of
// passing it on old data.
//
// Usage:
//
//	localdb -out DIR [-max-age-days N] [-go GO]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/mod/module"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "", "directory to write the database to (replaced)")
	flag.IntVar(&cfg.maxAgeDays, "max-age-days", 60, "data older than this many days is stale; 0 accepts any age")
	flag.BoolVar(&cfg.warnStale, "warn-stale", false, "stale data: print a warning and build the database anyway, instead of failing")
	flag.StringVar(&cfg.goCmd, "go", "go", "the go command that downloads the module")
	flag.Parse()
	if cfg.out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: localdb -out DIR [-max-age-days N] [-go GO]")
		os.Exit(2)
	}
	cfg.module, cfg.version, cfg.sum = vulndbModule, vulndbVersion, vulndbSum
	cfg.now = time.Now()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localdb:", err)
		os.Exit(1)
	}
}

type config struct {
	module, version, sum string // the pinned vulndb module
	out                  string
	maxAgeDays           int
	warnStale            bool // stale data is a warning (CI: the check still runs, on the data it has)
	goCmd                string
	now                  time.Time
}

// run checks the pinned version's age, downloads it, builds the database
// in cfg.out, and writes what it built, with its date, to w.
func run(ctx context.Context, cfg config, w io.Writer) error {
	mv := cfg.module + "@" + cfg.version
	// vulndb is never tagged, so every version is a pseudo-version, whose
	// timestamp is the commit's (UTC).
	date, err := module.PseudoVersionTime(cfg.version)
	if err != nil {
		return fmt.Errorf("%s: %w", mv, err)
	}
	age := cfg.now.Sub(date)
	days := int(age.Hours() / 24)
	if cfg.maxAgeDays > 0 && age > time.Duration(cfg.maxAgeDays)*24*time.Hour {
		stale := fmt.Errorf("%s: the vulnerability data of %s is %d days old, more than the %d allowed; "+
			"pin a newer version in tools/govulncheck/localdb/pin.go (go mod download -json %s@latest gives Version and Sum), "+
			"or set VULNDB_MAX_AGE_DAYS=0 to check against the old data knowingly",
			mv, date.Format(time.DateOnly), days, cfg.maxAgeDays, cfg.module)
		if !cfg.warnStale {
			return stale
		}
		fmt.Fprintf(w, "WARNING: %v; checking against it anyway (-warn-stale)\n", stale)
	}

	start := time.Now()
	zipPath, err := download(ctx, cfg.goCmd, cfg.module, cfg.version, cfg.sum)
	if err != nil {
		return err
	}
	fetched := time.Since(start)
	s, err := Build(zipPath, mv, date, cfg.out)
	if err != nil {
		return err
	}
	built := time.Since(start) - fetched

	fmt.Fprintf(w, "vulnerability database: %s (%s)\n", mv, cfg.sum)
	fmt.Fprintf(w, "  data as of %s, %d days old: a snapshot, not a live feed; vulnerabilities published since are not checked\n",
		date.Format("2006-01-02 15:04:05 UTC"), days)
	fmt.Fprintf(w, "  %d entries (%d withdrawn) for %d modules in %s (download %.1f s, build %.1f s)\n",
		s.Entries, s.Withdrawn, s.Modules, cfg.out, fetched.Seconds(), built.Seconds())
	return nil
}
