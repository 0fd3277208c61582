package errtext

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// utf16LE is s encoded as UTF-16LE with a byte order mark, as a spreadsheet
// saves "Unicode text".
func utf16LE(s string) string {
	b := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return string(b)
}

// forbidden reports whether Clean's rules forbid r in its output: a
// control character but newline and tab, or a bidirectional control: the
// rules stated again, apart from escapedASCII and escapedRune, so that a
// test against it checks them.
func forbidden(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// checkSafe fails the test unless out obeys Clean's rules: valid UTF-8, no
// forbidden character, at most Limit bytes, and a fixed point of Clean.
func checkSafe(t *testing.T, in, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("Clean(%q) = %q is not valid UTF-8", trim(in), trim(out))
	}
	for i, r := range out {
		if forbidden(r) {
			t.Errorf("Clean(%q) has control %U at byte %d", trim(in), r, i)
			break
		}
	}
	if len(out) > Limit {
		t.Errorf("Clean(%q) is %d bytes, more than Limit %d", trim(in), len(out), Limit)
	}
	if again := Clean(out); again != out {
		t.Errorf("Clean is not idempotent on %q: %q", trim(out), trim(again))
	}
}

// sink keeps the compiler from dropping a call whose allocations are
// counted.
var sink string

func trim(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}

// TestCleanEscapesWhatCannotLeaveTheProcess checks Clean against
// hand-worked outputs.
func TestCleanEscapesWhatCannotLeaveTheProcess(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"clean ASCII unchanged", "run r1: open trainer: prepare data a.csv: line 3: bad close; fix the file", ""},
		{"clean non-ASCII unchanged", "données: 価格 ±3 € — ok\tcolumn\nnext line", ""},
		{"empty", "", ""},
		{"NUL", "bad\x00byte", `bad\x00byte`},
		{"other C0, CR and DEL", "a\rb\x1b[31mc\x7f", `a\x0db\x1b[31mc\x7f`},
		{"invalid UTF-8 bytes kept as escapes", "caf\xe9 \xff\xfe end", `caf\xe9 \xff\xfe end`},
		{"truncated sequence", "x\xe2\x82", `x\xe2\x82`},
		{"C1 control", "a\u0085b", `a\u0085b`},
		{"bidi override", "abc\u202edcba\u2066x\u2069", `abc\u202edcba\u2066x\u2069`},
		{"UTF-16 header", "the header has: " + utf16LE("date,open"),
			`the header has: \xff\xfed\x00a\x00t\x00e\x00,\x00o\x00p\x00e\x00n\x00`},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			if want == "" {
				want = c.in
			}
			got := Clean(c.in)
			if got != want {
				t.Errorf("Clean(%q) = %q, want %q", c.in, got, want)
			}
			checkSafe(t, c.in, got)
			if want == c.in {
				if n := testing.AllocsPerRun(10, func() { sink = Clean(c.in) }); n != 0 {
					t.Errorf("Clean of clean text allocated %v times, want 0", n)
				}
			}
		})
	}
}

// TestCleanCutsLongTextInTheMiddle checks the bound: a text over Limit keeps
// its head and its end (what failed, what to do), and the marker counts the
// input bytes left out, so head + cut + tail is the input's length.
func TestCleanCutsLongTextInTheMiddle(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name string
		in   string
		unit int // bytes of output per byte of input: 1 plain, 4 escaped
	}{
		{"1 MiB of ASCII", "run r1: " + strings.Repeat("a", mib) + "; fix the file", 1},
		{"1 MiB of NUL", strings.Repeat("\x00", mib), 4},
		{"1 MiB of invalid bytes", strings.Repeat("\xff", mib), 4},
		{"exactly Limit", strings.Repeat("b", Limit), 1},
		{"Limit plus one", strings.Repeat("b", Limit+1), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Clean(c.in)
			checkSafe(t, c.in, got)
			if len(c.in)*c.unit <= Limit {
				if got != c.in {
					t.Fatalf("a text of %d bytes was changed", len(c.in))
				}
				return
			}
			head, rest, ok := strings.Cut(got, " ... (")
			if !ok {
				t.Fatalf("no cut marker in %q", trim(got))
			}
			num, tail, ok := strings.Cut(rest, " bytes cut) ... ")
			if !ok {
				t.Fatalf("no cut marker end in %q", trim(got))
			}
			cut, err := strconv.Atoi(num)
			if err != nil {
				t.Fatal(err)
			}
			if shown := len(head)/c.unit + cut + len(tail)/c.unit; shown != len(c.in) {
				t.Errorf("head %d + cut %d + tail %d input bytes = %d, want the input's %d",
					len(head)/c.unit, cut, len(tail)/c.unit, shown, len(c.in))
			}
			if !strings.HasPrefix(c.in, "run r1: ") {
				return
			}
			if !strings.HasPrefix(got, "run r1: aaa") || !strings.HasSuffix(got, "aaa; fix the file") {
				t.Errorf("the cut lost the head or the end: %q", trim(got))
			}
			if len(tail) < tailBudget-1 || len(head) < Limit-markerMax-tailBudget-3 {
				t.Errorf("kept %d bytes of head and %d of tail, want about %d and %d", len(head), len(tail), Limit-markerMax-tailBudget, tailBudget)
			}
		})
	}
}

// TestCleanNeverSplitsARune checks that a cut next to multi-byte runes
// keeps whole runes on both sides.
func TestCleanNeverSplitsARune(t *testing.T) {
	in := strings.Repeat("価", 3*Limit) // 3 bytes each
	got := Clean(in)
	checkSafe(t, in, got)
	head, rest, _ := strings.Cut(got, " ... (")
	_, tail, _ := strings.Cut(rest, " bytes cut) ... ")
	if strings.Trim(head, "価") != "" || strings.Trim(tail, "価") != "" {
		t.Errorf("the cut split a rune: head ends %q, tail starts %q", trim(head), trim(tail))
	}
}

// FuzzCleanIsSafe checks Clean's rules on any input.
func FuzzCleanIsSafe(f *testing.F) {
	for _, s := range []string{"", "ok", "a\x00b", "\xff\xfe", utf16LE("date,open,high"), "\u202e", strings.Repeat("\x01\xc3", Limit)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Clean(s)
		checkSafe(t, s, got)
		if len(s) <= Limit && utf8.ValidString(s) && !strings.ContainsFunc(s, forbidden) && got != s {
			t.Errorf("clean text %q was changed to %q", s, got)
		}
		if !strings.Contains(got, " bytes cut) ... ") && len(got) < len(s) {
			t.Errorf("Clean(%q) = %q dropped bytes without saying so", s, got)
		}
	})
}
