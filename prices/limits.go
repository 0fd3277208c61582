package prices

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits bound what reading one price file may cost, so that a file, or a
// config naming one, cannot take a worker's memory or time: a read stops
// with a *ParseError at the first limit passed, having held at most one
// line and the bars so far. They are the process's (flag --data-limits of
// the worker and of every command that reads data, ParseLimits), never a
// run config's: whoever can start a run must not be able to raise them
// (docs/adr/0029-data-roots-and-bounded-reads.md). A zero field takes its
// default.
type Limits struct {
	// MaxBytes bounds the file's size, checked before a byte is read.
	MaxBytes int64
	// MaxLineBytes bounds one line, its line end included.
	MaxLineBytes int
	// MaxFields bounds the fields of one line.
	MaxFields int
	// MaxBars bounds the bars of one file.
	MaxBars int
}

// The default limits: about 3.5 million lines of a typical OHLCV file
// (about 75 bytes a line); bars of up to a few hundred characters; a
// thousand bars a year for 1,000 years, or 1-minute bars of 24-hour markets
// for about 2 years. market.Prepare holds about 750 bytes a bar (56 float64 raw
// and 56 float32 normalised features, the bar and its ATR), so the default
// bars cost at most about 750 MB prepared.
const (
	DefaultMaxBytes     = 256 << 20
	DefaultMaxLineBytes = 64 << 10
	DefaultMaxFields    = 256
	DefaultMaxBars      = 1_000_000
)

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = DefaultMaxLineBytes
	}
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
	}
	if l.MaxBars <= 0 {
		l.MaxBars = DefaultMaxBars
	}
	return l
}

// String is l in ParseLimits's form, defaults filled in.
func (l Limits) String() string {
	l = l.withDefaults()
	return fmt.Sprintf("bytes=%d,line=%d,fields=%d,bars=%d", l.MaxBytes, l.MaxLineBytes, l.MaxFields, l.MaxBars)
}

// limitNames are ParseLimits's keys, as errors name them.
const limitNames = "bytes, line, fields, bars"

// ParseLimits reads limits written as comma-separated KEY=N (keys bytes,
// line, fields and bars; sizes may end in KiB, MiB or GiB), for example
// "bytes=2GiB,bars=5000000". A key left out, and "" for all, keeps its
// default.
func ParseLimits(s string) (Limits, error) {
	var l Limits
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return l, fmt.Errorf("data limits %q: %q is not KEY=N (keys %s)", s, kv, limitNames)
		}
		n, err := parseSize(v)
		if err != nil {
			return l, fmt.Errorf("data limits %q: %s: %v", s, k, err)
		}
		switch k {
		case "bytes":
			l.MaxBytes = n
		case "line", "fields", "bars":
			if n > 1<<40 {
				return l, fmt.Errorf("data limits %q: %s=%d is too large", s, k, n)
			}
			switch k {
			case "line":
				l.MaxLineBytes = int(n)
			case "fields":
				l.MaxFields = int(n)
			default:
				l.MaxBars = int(n)
			}
		default:
			return l, fmt.Errorf("data limits %q: unknown key %q (keys %s)", s, k, limitNames)
		}
	}
	return l, nil
}

// parseSize parses a positive count, optionally in KiB, MiB or GiB.
func parseSize(v string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if s, ok := strings.CutSuffix(v, suffix); ok {
			v, mult = s, m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive whole number (optionally ending in KiB, MiB or GiB)", v)
	}
	return n * mult, nil
}
