package prices

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // LEAN equity times are New York's, on every machine

	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/files"
)

// QuantConnect LEAN's hour and daily bars (docs/adr/0035-corpus-formats.md)
// come as a zip archive holding one headerless CSV file, named for the
// ticker ("aapl.csv"), each line one bar:
//
//	equity: YYYYMMDD HH:MM,open,high,low,close,volume
//	forex:  YYYYMMDD HH:MM,bidOpen,bidHigh,bidLow,bidClose,bidSize,askOpen,askHigh,askLow,askClose,askSize
//
// The time is the bar's start. Equity prices are integers, the price ×
// 10,000 ("deci-cents"), in New York time (LEAN's market-hours database:
// Equity-usa's dataTimeZone is America/New_York), raw: not adjusted for
// splits or dividends. Forex prices are plain decimals, in UTC (OANDA's
// week opens at 21:00 in New York's summer and 22:00 in its winter, 17:00
// New York time both). Bars are stored in UTC.

// newYork is LEAN's equity data time zone.
var newYork = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err) // time/tzdata is linked in: cannot happen
	}
	return loc
}()

// leanTimeLayout is the time of a LEAN hour or daily bar.
const leanTimeLayout = "20060102 15:04"

// leanScale is LEAN's equity price multiplier.
const leanScale = 10000

// parseLeanZip reads the LEAN zip name (its bytes raw), and for an equity
// the factor file beside it (LeanFactorPath), and returns its bars:
// adjusted when the factor file exists, raw with Origin.Note saying so
// when it does not.
func (s Source) parseLeanZip(ctx context.Context, name string, raw []byte, lim Limits, adjust bool) (*Bars, error) {
	entry, ticker, err := leanEntry(name, raw, lim)
	if err != nil {
		return nil, err
	}
	kind, err := leanKind(name, entry, lim)
	if err != nil {
		return nil, err
	}
	var ff *FactorFile
	note := ""
	if kind == FormatLeanEquity && !adjust {
		note = "not adjusted for splits or dividends: read raw (UnadjustedLeanBars)"
	}
	if kind == FormatLeanEquity && adjust {
		// The factor file beside the zip that was read: of the zip's
		// resolved path, so that a relative path found in one data root
		// never takes another root's factor file. Errors and the note
		// name it as the zip was named.
		fp := LeanFactorPath(name, ticker)
		at := fp
		if abs, err := s.roots().Resolve(name); err == nil && !data.IsBundled(name) {
			at = LeanFactorPath(abs, ticker)
		}
		switch ff, err = s.factorFile(ctx, at, lim); {
		case err != nil:
			return nil, fmt.Errorf("LEAN equity %s: factor file: %w", name, err)
		case ff == nil:
			note = fmt.Sprintf("not adjusted for splits or dividends: no factor file %s (LEAN's factor_files/%s.csv beside the zip); a split shows as a jump", fp, ticker)
		default:
			note = fmt.Sprintf("adjusted for splits and dividends with %s (%d rows)", fp, len(ff.Rows))
		}
	}
	rc, err := entry.Open()
	if err != nil {
		return nil, &ParseError{File: name, Reason: fmt.Sprintf("zip entry %s: %v", excerpt(entry.Name), err)}
	}
	defer rc.Close()
	inner := name + ":" + path.Base(entry.Name) // a ticker's name (leanEntry)
	b, err := ParseLean(ctx, inner, rc, kind, ff, lim)
	if err != nil {
		return nil, err
	}
	b.Name = name
	b.Origin = Origin{Format: kind, Adjusted: ff != nil, Note: note}
	return b, nil
}

// leanEntry returns the one CSV entry of the zip raw and its ticker (the
// entry's base name without ".csv", in lower case). Directory entries are
// ignored; any other entry besides the one is refused, as is an entry that
// says it decompresses to more than lim.MaxBytes (a zip bomb; the read is
// capped at MaxBytes too, whatever the entry says).
func leanEntry(name string, raw []byte, lim Limits) (*zip.File, string, error) {
	bad := func(format string, args ...any) (*zip.File, string, error) {
		return nil, "", &ParseError{File: name, Reason: fmt.Sprintf(format, args...)}
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return bad("not a readable zip archive: %v", err)
	}
	var csv []*zip.File
	others := 0
	for _, f := range zr.File {
		switch {
		case strings.HasSuffix(f.Name, "/"):
		case f.Mode().IsRegular() && strings.EqualFold(path.Ext(f.Name), ".csv"):
			csv = append(csv, f)
		default:
			others++
		}
	}
	if len(csv) != 1 || others > 0 {
		return bad("a LEAN zip must hold exactly one regular .csv entry; this one holds %d .csv and %d other entries", len(csv), others)
	}
	f := csv[0]
	if f.Flags&0x1 != 0 {
		return bad("zip entry %s is encrypted", excerpt(f.Name))
	}
	if f.UncompressedSize64 > uint64(lim.MaxBytes) {
		return bad("zip entry %s decompresses to %d bytes, more than the limit of %d bytes (data limit bytes; --data-limits raises it)",
			excerpt(f.Name), f.UncompressedSize64, lim.MaxBytes)
	}
	ticker := strings.ToLower(strings.TrimSuffix(path.Base(f.Name), path.Ext(f.Name)))
	if ticker == "" || strings.Trim(ticker, "abcdefghijklmnopqrstuvwxyz0123456789._-") != "" {
		return bad("zip entry %s: want a ticker's name (letters, digits, '.', '_', '-') and .csv", excerpt(f.Name))
	}
	return f, ticker, nil
}

// leanKind reads the first line of the entry and tells an equity file (6
// fields) from a forex one (11).
func leanKind(name string, entry *zip.File, lim Limits) (Format, error) {
	rc, err := entry.Open()
	if err != nil {
		return "", &ParseError{File: name, Reason: fmt.Sprintf("zip entry %s: %v", excerpt(entry.Name), err)}
	}
	defer rc.Close()
	inner := name + ":" + path.Base(entry.Name)
	lr, err := newLineReader(inner, rc, lim)
	if err != nil {
		return "", err
	}
	for {
		line, err := lr.next()
		if err == io.EOF {
			return "", &ParseError{File: inner, Reason: "no bars: the entry holds no line that is not blank"}
		}
		if err != nil {
			return "", err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		switch n := bytes.Count(line, []byte(",")) + 1; n {
		case 6:
			return FormatLeanEquity, nil
		case 11:
			return FormatLeanForex, nil
		default:
			return "", &ParseError{File: inner, Line: lr.line, Reason: fmt.Sprintf(
				"has %d comma-separated fields: a LEAN hour or daily bar has 6 (equity: time, open, high, low, close, volume) or 11 (forex: time, bid open, high, low, close, size, ask open, high, low, close, size)", n)}
		}
	}
}

// leanEquityCols and leanForexCols name the fields of a LEAN row, as
// errors name its columns.
var (
	leanEquityCols = []string{"time", "open", "high", "low", "close", "volume"}
	leanForexCols  = []string{"time", "bid open", "bid high", "bid low", "bid close", "bid size",
		"ask open", "ask high", "ask low", "ask close", "ask size"}
)

// ParseLean parses the CSV inside a LEAN zip (kind FormatLeanEquity or
// FormatLeanForex; the layouts are in lean.go's comment), within lim, and
// checks every row as ParseCSV does, with the line in its errors.
//
// Equity bars: prices ÷ 10,000, New York time converted to UTC, and, when
// ff is not nil, adjusted as LEAN adjusts them (DataNormalizationMode
// Adjusted): each price × price_factor × split_factor and the volume ÷
// split_factor of ff's row for the bar's New York date (FactorFile.At).
//
// Forex bars: Open, High, Low and Close are the mids ((bid + ask) / 2 of
// each), Spread is ask open − bid open, HasVolume is false (OANDA's sizes
// are 0); a row whose ask is below its bid (open, high, low or close) is
// refused.
func ParseLean(ctx context.Context, name string, r io.Reader, kind Format, ff *FactorFile, lim Limits) (*Bars, error) {
	lim = lim.withDefaults()
	lr, err := newLineReader(name, r, lim)
	if err != nil {
		return nil, err
	}
	c := newBarChecker(name, lim)
	cols := leanEquityCols
	if kind == FormatLeanForex {
		cols = leanForexCols
	} else {
		c.b.HasVolume = true
	}
	lr.sep = ','
	var cur factorCursor
	for fields, err := range lr.rows(ctx) {
		if err != nil {
			return nil, err
		}
		if len(fields) != len(cols) {
			return nil, c.bad(lr.line, "", "has %d fields, want %d (%s)", len(fields), len(cols), strings.Join(cols, ", "))
		}
		ts := strings.TrimSpace(fields[0])
		loc := time.UTC
		if kind == FormatLeanEquity {
			loc = newYork
		}
		local, err := time.ParseInLocation(leanTimeLayout, ts, loc)
		if err != nil {
			return nil, c.bad(lr.line, "time", "cannot parse time %s: want YYYYMMDD HH:MM (LEAN hour or daily bars)", excerpt(ts))
		}
		var v [10]float64
		for k := 1; k < len(fields); k++ {
			s := strings.TrimSpace(fields[k])
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, c.bad(lr.line, cols[k], "cannot parse %s as a number", excerpt(s))
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, c.bad(lr.line, cols[k], "value %s is not finite", excerpt(s))
			}
			v[k-1] = x
		}
		t := local.UTC()
		if kind == FormatLeanEquity {
			o, h, l, cl, vol := v[0]/leanScale, v[1]/leanScale, v[2]/leanScale, v[3]/leanScale, v[4]
			if err := c.ohlc(lr.line, [4]string{"open", "high", "low", "close"}, o, h, l, cl); err != nil {
				return nil, err
			}
			if ff != nil {
				row := cur.at(ff, dateKey(local))
				k := row.PriceFactor * row.SplitFactor
				o, h, l, cl, vol = o*k, h*k, l*k, cl*k, vol/row.SplitFactor
			}
			if err := c.add(lr.line, "time", t, ohlcNames, o, h, l, cl, "volume", vol); err != nil {
				return nil, err
			}
			continue
		}
		bid := [4]float64{v[0], v[1], v[2], v[3]}
		ask := [4]float64{v[5], v[6], v[7], v[8]}
		if err := c.ohlc(lr.line, [4]string{cols[1], cols[2], cols[3], cols[4]}, bid[0], bid[1], bid[2], bid[3]); err != nil {
			return nil, err
		}
		if err := c.ohlc(lr.line, [4]string{cols[6], cols[7], cols[8], cols[9]}, ask[0], ask[1], ask[2], ask[3]); err != nil {
			return nil, err
		}
		for k := range 4 {
			if ask[k] < bid[k] {
				return nil, c.bad(lr.line, cols[6+k], "ask %v is below the bid %v (%s)", ask[k], bid[k], cols[1+k])
			}
		}
		mid := func(k int) float64 { return (bid[k] + ask[k]) / 2 }
		if err := c.add(lr.line, "time", t, ohlcNames, mid(0), mid(1), mid(2), mid(3), "", 0); err != nil {
			return nil, err
		}
		c.b.Spread = append(c.b.Spread, ask[0]-bid[0])
	}
	return c.done("the file holds no line that is not blank")
}

// UnadjustedLeanBars is Bars for a LEAN equity zip, but with the raw
// prices (÷ 10,000), not adjusted by its factor file: what `data inspect`
// compares the adjusted series with, to show the splits the adjustment
// removed. Any other file is an error.
func (s Source) UnadjustedLeanBars(ctx context.Context, path string) (*Bars, error) {
	f, err := s.open(path)
	if err != nil {
		return nil, fmt.Errorf("load bars: %w", err)
	}
	defer f.Close()
	lim := s.Limits.withDefaults()
	raw, err := readAllBounded(path, f, lim.MaxBytes)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(raw, zipMagic) {
		return nil, &ParseError{File: path, Reason: "not a LEAN zip"}
	}
	return s.parseLeanZip(ctx, path, raw, lim, false)
}

// dateKey is t's calendar date as YYYYMMDD, in t's own location.
func dateKey(t time.Time) int {
	y, m, d := t.Date()
	return y*10000 + int(m)*100 + d
}

// LeanFactorPath is where LEAN keeps the factor file of the equity zip
// at zipPath whose CSV is ticker.csv: factor_files/TICKER.csv in the
// zip's directory (LEAN's layout: equity/usa/hour/aapl.zip and
// equity/usa/factor_files/aapl.csv; the corpus keeps lean/equity-aapl.zip
// and lean/factor_files/aapl.csv, the factor files beside the zips).
func LeanFactorPath(zipPath, ticker string) string {
	return filepath.Join(filepath.Dir(zipPath), "factor_files", ticker+".csv")
}

// factorFile reads the factor file at p through s: nil, and no error,
// when there is none.
func (s Source) factorFile(ctx context.Context, p string, lim Limits) (*FactorFile, error) {
	if data.IsBundled(p) {
		return nil, nil
	}
	f, err := s.open(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, files.ErrOutsideRoot):
		// A zip allowed by name (Source.Allow) has its factor files
		// allowed with it; one outside the roots that does not exist is
		// no factor file, one that exists is refused.
		if _, serr := os.Lstat(p); errors.Is(serr, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	case err != nil:
		return nil, err
	}
	defer f.Close()
	return ParseFactorFile(ctx, p, f, lim)
}

// leanCompanions lists the factor files that a LEAN zip at p may need,
// for Source.Allow: every .csv file of the factor_files directory beside
// p (at most 10,000 of them), none when there is no such directory.
func leanCompanions(p string) []string {
	dir := filepath.Join(filepath.Dir(p), "factor_files")
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	ents, err := d.ReadDir(10_000)
	if err != nil && err != io.EOF {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.EqualFold(filepath.Ext(e.Name()), ".csv") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
