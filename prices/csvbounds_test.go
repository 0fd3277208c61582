package prices

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/files"
)

// endless is a reader that yields prefix and then repeats unit for ever
// (or until it has yielded limit bytes, when limit > 0), counting what it
// yielded.
type endless struct {
	prefix, unit []byte
	limit, n     int64
	off          int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.limit > 0 && e.n >= e.limit {
		return 0, io.EOF
	}
	if e.limit > 0 && int64(len(p)) > e.limit-e.n {
		p = p[:e.limit-e.n]
	}
	k := 0
	for k < len(p) {
		if len(e.prefix) > 0 {
			c := copy(p[k:], e.prefix)
			e.prefix, k = e.prefix[c:], k+c
			continue
		}
		c := copy(p[k:], e.unit[e.off:])
		e.off, k = (e.off+c)%len(e.unit), k+c
	}
	e.n += int64(k)
	return k, nil
}

// measure runs f and returns what it allocated (a bound on the heap it
// can have grown by) and how long it took.
func measure(f func()) (alloc uint64, took time.Duration) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took = time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}

const hdr = "time,open,high,low,close,volume\n"

// TestParseCSVStopsAtTheLineLimitWithBoundedMemory feeds ParseCSV a
// 200 MB input that never ends a line, as data and as the header: the
// parse fails at the default line limit (64 KiB) having read little more
// than it and allocated a bounded amount. io.ReadAll grew with the input:
// a 1 GB line peaked at 5.5 GB (issue 43).
func TestParseCSVStopsAtTheLineLimitWithBoundedMemory(t *testing.T) {
	for _, prefix := range []string{"", hdr, hdr + "2024-01-01 00:00:00,1,1,1,1,1\n"} {
		src := &endless{prefix: []byte(prefix), unit: []byte("1234567,"), limit: 200 << 20}
		var err error
		alloc, took := measure(func() { _, err = ParseCSV(context.Background(), "huge.csv", src, Limits{}) })
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "longer than the limit of 65536 bytes") ||
			pe.Line != strings.Count(prefix, "\n")+1 {
			t.Fatalf("prefix %q: %v, want a *ParseError at line %d: longer than the limit", prefix, err, strings.Count(prefix, "\n")+1)
		}
		t.Logf("prefix of %d lines: failed after reading %d of the 200 MiB, %d KiB allocated, in %v", strings.Count(prefix, "\n"), src.n, alloc>>10, took)
		if src.n > 1<<20 || alloc > 4<<20 {
			t.Errorf("read %d bytes and allocated %d to refuse a line of 64 KiB: want at most 1 MiB and 4 MiB", src.n, alloc)
		}
	}
}

// TestParseCSVStopsAtTheSizeLimit: an input of valid rows that goes on
// past Limits.MaxBytes fails there, holding only its bars; a file over
// the limit is refused before a byte of it is read (files.ErrTooLarge).
func TestParseCSVStopsAtTheSizeLimit(t *testing.T) {
	src, n := rows()
	_, err := ParseCSV(context.Background(), "big.csv", src, Limits{MaxBytes: 1 << 20})
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "more than the limit of 1048576 bytes") {
		t.Fatalf("%v, want a *ParseError: more than the limit", err)
	}
	if *n > 1<<20/20 {
		t.Errorf("generated %d rows (of at least 30 bytes) for a limit of 1 MiB", *n)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Source{Roots: roots, Limits: Limits{MaxBytes: 1 << 20}}.Bars(context.Background(), p)
	if !errors.Is(err, files.ErrTooLarge) || !strings.Contains(err.Error(), "2097152 bytes, the limit is 1048576") || !strings.Contains(err.Error(), "--data-limits") {
		t.Errorf("a 2 MiB file under a 1 MiB limit: %v, want files.ErrTooLarge with both sizes and how to raise it", err)
	}
}

// TestParseCSVStopsAtTheFieldAndBarLimits: a line of more fields than
// Limits.MaxFields and a file of more bars than Limits.MaxBars fail with
// the limit named.
func TestParseCSVStopsAtTheFieldAndBarLimits(t *testing.T) {
	wide := "time,open,high,low,close" + strings.Repeat(",x", 10) + "\n"
	_, err := ParseCSV(context.Background(), "wide.csv", strings.NewReader(wide), Limits{MaxFields: 8})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 1 || !strings.Contains(pe.Reason, "more than the limit of 8 fields") {
		t.Errorf("a header of 15 fields under a limit of 8: %v", err)
	}
	var sb strings.Builder
	sb.WriteString(hdr)
	t0 := utc("2024-01-01 00:00:00")
	for i := range 10 {
		sb.WriteString(t0.Add(time.Duration(i)*time.Hour).Format(time.DateTime) + ",1,1,1,1,1\n")
	}
	_, err = ParseCSV(context.Background(), "long.csv", strings.NewReader(sb.String()), Limits{MaxBars: 5})
	if !errors.As(err, &pe) || pe.Line != 7 || !strings.Contains(pe.Reason, "more than the limit of 5 bars") {
		t.Errorf("10 bars under a limit of 5: %v, want line 7, more than the limit", err)
	}
	if b, err := ParseCSV(context.Background(), "long.csv", strings.NewReader(sb.String()), Limits{MaxBars: 10}); err != nil || b.Len() != 10 {
		t.Errorf("10 bars under a limit of 10: %v", err)
	}
}

// TestParseCSVStopsWhenCancelled: a parse of an endless input of valid
// rows returns soon after its context is cancelled, with the context's
// error and the line it reached. Before, the read ran to its end (54 s
// with SIGTERM caught, issue 43).
func TestParseCSVStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src, next := rows()
	var cancelled time.Time
	timer := time.AfterFunc(200*time.Millisecond, func() { cancelled = time.Now(); cancel() })
	defer timer.Stop()
	_, err := ParseCSV(ctx, "endless.csv", src, Limits{MaxBytes: 1 << 40, MaxBars: 1 << 40})
	lag := time.Since(cancelled)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "endless.csv") || !strings.Contains(err.Error(), "stopped at line") {
		t.Fatalf("%v, want context.Canceled naming the file and the line", err)
	}
	t.Logf("returned %v after the cancel, %d rows read", lag, *next)
	if lag > 250*time.Millisecond {
		t.Errorf("returned %v after the cancel, want within 250 ms", lag)
	}
}

// rows is an endless price file: the header, then a valid bar a second,
// generated as it is read; n counts the bars generated.
func rows() (r io.Reader, n *int) {
	var buf bytes.Buffer
	buf.WriteString(hdr)
	t0 := utc("2024-01-01 00:00:00")
	n = new(int)
	return readerFunc(func(p []byte) (int, error) {
		for buf.Len() < len(p) {
			buf.WriteString(t0.Add(time.Duration(*n)*time.Second).Format(time.DateTime) + ",1,1,1,1,1\n")
			*n++
		}
		return buf.Read(p)
	}), n
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestParseCSVRefusesOtherEncodings: UTF-16 and UTF-32 text (with a
// byte-order mark or without), and a NUL byte in a row, are refused at
// the first line with what the text is and what to do.
func TestParseCSVRefusesOtherEncodings(t *testing.T) {
	text := hdr + "2024-01-01 00:00:00,1,1,1,1,1\n"
	utf16 := func(bom []byte, big bool) []byte {
		out := append([]byte(nil), bom...)
		for _, c := range []byte(text) {
			if big {
				out = append(out, 0, c)
			} else {
				out = append(out, c, 0)
			}
		}
		return out
	}
	utf32le := []byte("\xff\xfe\x00\x00")
	for _, c := range []byte(text) {
		utf32le = append(utf32le, c, 0, 0, 0)
	}
	cases := []struct {
		name string
		in   []byte
		line int
		want string
	}{
		{"UTF-16 LE with BOM", utf16([]byte("\xff\xfe"), false), 1, "UTF-16 (little-endian) text (its byte-order mark says so): save it as UTF-8"},
		{"UTF-16 BE with BOM", utf16([]byte("\xfe\xff"), true), 1, "UTF-16 (big-endian) text"},
		{"UTF-32 LE with BOM", utf32le, 1, "UTF-32 (little-endian) text"},
		{"UTF-16 LE without BOM", utf16(nil, false), 1, "UTF-16 (little-endian) text without a byte-order mark; save it as UTF-8"},
		{"UTF-16 BE without BOM", utf16(nil, true), 1, "UTF-16 (big-endian) text without a byte-order mark"},
		{"NUL in a row", []byte(hdr + "2024-01-01 00:00:00,1,1\x00,1,1,1\n"), 2, "a NUL byte at byte 24 of the line"},
	}
	for _, c := range cases {
		_, err := ParseCSV(context.Background(), "enc.csv", bytes.NewReader(c.in), Limits{})
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(pe.Reason, c.want) {
			t.Errorf("%s: %v, want line %d: %q", c.name, err, c.line, c.want)
		}
	}
}

// TestErrorsNeverEchoTheFile: a file that is not a price file (the first
// line of a password file, a .pgpass line, a bare secret, a header with a
// secret among price columns) is refused without a byte of it beyond the
// column names ParseCSV knows; a bad value on a row under a real header
// is quoted, at most 32 bytes of it, escaped. Before, the missing-column
// error listed the whole header (issue 43: "the header has:
// root:*:20228:...").
func TestErrorsNeverEchoTheFile(t *testing.T) {
	secretLines := []string{
		"root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n",
		"db.internal:5432:*:alice:s3cr3t-pa55\n",
		"hunter2\n",
		"time,open,high,low,close,hunter2\n",
		"Time\tOpen\tS3CR3T=abc\n",
	}
	for _, in := range secretLines {
		_, err := ParseCSV(context.Background(), "secret", strings.NewReader(in), Limits{})
		if err == nil {
			t.Fatalf("%q parsed", in)
		}
		for _, leak := range []string{"root", "20228", "alice", "s3cr3t", "hunter2", "S3CR3T", "abc"} {
			if strings.Contains(in, leak) && strings.Contains(err.Error(), leak) {
				t.Errorf("the error for %q repeats %q: %v", in, leak, err)
			}
		}
		t.Logf("%q: %v", in, err)
	}
	long := hdr + "2024-01-01 00:00:00,1," + strings.Repeat("9", 100) + "x\x01,1,1,1\n"
	_, err := ParseCSV(context.Background(), "long.csv", strings.NewReader(long), Limits{})
	want := `cannot parse "` + strings.Repeat("9", 32) + `"… as a number`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a long bad value: %v, want %s", err, want)
	}
	_, err = ParseCSV(context.Background(), "ctl.csv", strings.NewReader(hdr+"2024-01-01 00:00:00,1,\x1b[2J\xff,1,1,1\n"), Limits{})
	if err == nil || !strings.Contains(err.Error(), `"\x1b[2J\xff"`) {
		t.Errorf("a value with control and invalid bytes: %v, want it escaped", err)
	}
}
