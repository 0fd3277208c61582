package prices

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/files"
)

// lineReader reads the lines of a price file within Limits, holding at
// most one line (MaxLineBytes) at a time: a file with no line end, or a
// reader that never ends, costs a bounded amount of memory and fails at
// the limit it passes.
type lineReader struct {
	name string
	lim  Limits
	br   *bufio.Reader
	line int    // the 1-based number of the line last returned
	long []byte // a line longer than br's buffer, assembled

	sep    byte     // rows' separator; 0 until the first row sets it
	fields []string // rows' fields, reused from row to row
}

// newLineReader reads r, of at most lim.MaxBytes bytes, after checking its
// first bytes for an encoding other than UTF-8 (checkEncoding) and
// dropping a UTF-8 byte-order mark.
func newLineReader(name string, r io.Reader, lim Limits) (*lineReader, error) {
	l := &lineReader{name: name, lim: lim}
	l.br = bufio.NewReaderSize(&capReader{r: r, max: lim.MaxBytes, name: name}, min(lim.MaxLineBytes, 64<<10))
	head, err := l.br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, readError(name, err)
	}
	if err := checkEncoding(name, head); err != nil {
		return nil, err
	}
	if bytes.HasPrefix(head, utf8BOM) {
		l.br.Discard(len(utf8BOM))
	}
	return l, nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// checkEncoding refuses text that starts with a UTF-16 or UTF-32
// byte-order mark: every byte of it would otherwise be read as a bad row.
func checkEncoding(name string, head []byte) error {
	for _, e := range []struct {
		bom  string
		what string
	}{
		// UTF-32 first: its little-endian mark begins with UTF-16's.
		{"\xff\xfe\x00\x00", "UTF-32 (little-endian)"},
		{"\x00\x00\xfe\xff", "UTF-32 (big-endian)"},
		{"\xff\xfe", "UTF-16 (little-endian)"},
		{"\xfe\xff", "UTF-16 (big-endian)"},
	} {
		if bytes.HasPrefix(head, []byte(e.bom)) {
			return &ParseError{File: name, Line: 1, Reason: e.what + " text (its byte-order mark says so): save it as UTF-8"}
		}
	}
	return nil
}

// next returns the next line without its line end ("\n" or "\r\n"), and
// io.EOF after the last. The slice is valid until the next call. A line
// over MaxLineBytes, a NUL byte, and a file over MaxBytes are
// *ParseErrors.
func (l *lineReader) next() ([]byte, error) {
	l.long = l.long[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(l.long)+len(frag) > l.lim.MaxLineBytes {
				return nil, l.tooLong()
			}
			l.long = append(l.long, frag...)
			continue
		}
		line := frag
		if len(l.long) > 0 {
			line = append(l.long, frag...)
			l.long = line
		}
		if len(line) > l.lim.MaxLineBytes {
			return nil, l.tooLong()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, readError(l.name, err)
		}
		if len(line) == 0 {
			return nil, io.EOF
		}
		l.line++
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if i := bytes.IndexByte(line, 0); i >= 0 {
			return nil, l.nul(line, i)
		}
		return line, nil
	}
}

// nextIn is next for a read that ctx can stop: every 4,096 lines it
// checks ctx, and a cancelled read fails naming the file and the line it
// reached.
func (l *lineReader) nextIn(ctx context.Context) ([]byte, error) {
	line, err := l.next()
	if err != nil {
		return nil, err
	}
	if l.line%4096 == 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: stopped at line %d: %w", l.name, l.line, err)
		}
	}
	return line, nil
}

// nextText is nextIn passing over blank lines (white space only); it
// returns io.EOF at the end.
func (l *lineReader) nextText(ctx context.Context) ([]byte, error) {
	for {
		line, err := l.nextIn(ctx)
		if err != nil || len(bytes.TrimSpace(line)) > 0 {
			return line, err
		}
	}
}

// rows yields the fields of each line that is not blank (nextText),
// split at l.sep (splitFields) into a slice that the next row reuses. A
// read error, or a line that does not split (a *ParseError naming the
// line), is yielded with nil fields and ends the rows. When l.sep is 0,
// the first row sets it (separator).
func (l *lineReader) rows(ctx context.Context) iter.Seq2[[]string, error] {
	return func(yield func([]string, error) bool) {
		for {
			line, err := l.nextText(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if l.sep == 0 {
				l.sep = separator(line)
			}
			var why string
			if l.fields, why = splitFields(string(line), l.sep, l.lim.MaxFields, l.fields); why != "" {
				yield(nil, &ParseError{File: l.name, Line: l.line, Reason: why})
				return
			}
			if !yield(l.fields, nil) {
				return
			}
		}
	}
}

// separator is the field separator of a file whose first row is line: a
// tab when the row holds one, else a comma.
func separator(line []byte) byte {
	if bytes.IndexByte(line, '\t') >= 0 {
		return '\t'
	}
	return ','
}

func (l *lineReader) tooLong() error {
	return &ParseError{File: l.name, Line: l.line + 1, Reason: fmt.Sprintf(
		"the line is longer than the limit of %d bytes (data limit line; --data-limits raises it): not a file of price bars, or one line holds the whole file", l.lim.MaxLineBytes)}
}

func (l *lineReader) nul(line []byte, i int) error { return nulError(l.name, l.line, line, i) }

// nulError is the error of a NUL byte at line[i] (line number n of file
// name): binary data, or UTF-16 or UTF-32 text without a byte-order mark,
// whose ASCII characters each come with NUL bytes (every other byte of the
// line, or three in four).
func nulError(name string, n int, line []byte, i int) error {
	what := "a binary file, or UTF-16 or UTF-32 text without a byte-order mark"
	if m := len(line) &^ 1; m >= 4 {
		odd, even := 0, 0
		for k := 0; k < m; k += 2 {
			if line[k] == 0 {
				even++
			}
			if line[k+1] == 0 {
				odd++
			}
		}
		switch {
		case odd == m/2 && even == 0:
			what = "UTF-16 (little-endian) text without a byte-order mark"
		case even == m/2 && odd == 0:
			what = "UTF-16 (big-endian) text without a byte-order mark"
		}
	}
	return &ParseError{File: name, Line: n, Reason: fmt.Sprintf("a NUL byte at byte %d of the line: %s; save it as UTF-8 text", i+1, what)}
}

// capReader reads r and fails once it has passed max bytes.
type capReader struct {
	r    io.Reader
	max  int64
	n    int64
	name string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, c.err()
	}
	if room := c.max + 1 - c.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n - int(c.n-c.max), c.err()
	}
	return n, err
}

func (c *capReader) err() error {
	return &ParseError{File: c.name, Reason: fmt.Sprintf("more than the limit of %d bytes (data limit bytes; --data-limits raises it)", c.max)}
}

// readError is an error of the reader under a price file (a read error,
// a file that changed, a limit), named once.
func readError(name string, err error) error {
	var pe *ParseError
	if errors.As(err, &pe) || errors.Is(err, files.ErrChanged) || errors.Is(err, files.ErrNotRegular) {
		return err // names the file already
	}
	return fmt.Errorf("read %s: %w", name, err)
}

// splitFields splits the line s at sep into dst (reused), quoting as
// RFC 4180 does within one line: a field that begins with a quote runs to
// the next quote not doubled, and "" inside it is one quote. A quote in a
// field that does not begin with one, a quoted field followed by more than
// a separator, and a quoted field not closed on its line (price files
// never need a field that spans lines) fail with the reason; so does a
// line of more than max fields, as soon as it passes max.
func splitFields(s string, sep byte, max int, dst []string) ([]string, string) {
	dst = dst[:0]
	for {
		if len(dst) == max {
			return nil, fmt.Sprintf("the line has more than the limit of %d fields (data limit fields; --data-limits raises it)", max)
		}
		if len(s) == 0 || s[0] != '"' {
			f, rest, more := strings.Cut(s, string(sep))
			if strings.IndexByte(f, '"') >= 0 {
				return nil, fmt.Sprintf(`field %d: bare " in non-quoted field`, len(dst)+1)
			}
			dst = append(dst, f)
			if !more {
				return dst, ""
			}
			s = rest
			continue
		}
		var esc []byte // the field so far, when it holds a doubled quote
		i := 1
		for {
			j := strings.IndexByte(s[i:], '"')
			if j < 0 {
				return nil, fmt.Sprintf("field %d: the quoted field is not closed on its line (a field cannot span lines)", len(dst)+1)
			}
			j += i
			if j+1 < len(s) && s[j+1] == '"' {
				esc = append(esc, s[i:j+1]...)
				i = j + 2
				continue
			}
			f := s[1:j]
			if esc != nil {
				f = string(append(esc, s[i:j]...))
			}
			dst = append(dst, f)
			s = s[j+1:]
			break
		}
		if len(s) == 0 {
			return dst, ""
		}
		if s[0] != sep {
			return nil, fmt.Sprintf(`field %d: extraneous or missing " in quoted field`, len(dst))
		}
		s = s[1:] // the next field, empty at the line's end
	}
}

// excerpt is s as an error may quote it: at most 32 bytes, quoted and
// escaped (strconv.Quote: control bytes and invalid UTF-8 as escapes), so
// an error carries no more of a file than a short, printable piece of a
// value on a line that parsed as a row of bars.
func excerpt(s string) string {
	const max = 32
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + "…"
}
