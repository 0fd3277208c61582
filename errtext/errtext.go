// Package errtext makes error text safe to leave a process: to Temporal
// (whose protobuf string fields must be valid UTF-8), to PostgreSQL (whose
// text columns refuse NUL), to logs and to a terminal.
//
// Clean is a pure function of its argument (no I/O, no clocks, no global
// state), so workflow code may call it too. See
// docs/adr/0030-error-text-and-store-retries.md for the rules and why.
package errtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limit is the most bytes Clean returns. 4 KiB holds every message the
// project writes (what failed, the cause, what to do: a few hundred bytes)
// with room for a long path or a quoted line, and keeps a failure's chain of
// causes in a Temporal history event, a runs row and a log line small.
const Limit = 4096

// tailBudget is the part of Limit kept from the end of a text that is cut:
// the end of a message says what to do; the head, what failed.
const tailBudget = 1024

// markerMax is the longest cut marker (" ... (N bytes cut) ... " with a
// 20-digit N).
const markerMax = len(" ... (") + 20 + len(" bytes cut) ... ")

// Clean returns s as text that is safe to leave the process:
//
//   - valid UTF-8: each byte that is not part of a valid UTF-8 sequence is
//     shown as \xHH (never dropped, so a UTF-16 text stays recognisable);
//   - no control characters other than newline and tab: NUL, the other C0
//     controls and DEL are shown as \xHH, the C1 controls and the Unicode
//     bidirectional overrides and isolates (which reorder what a terminal
//     shows) as \uHHHH;
//   - at most Limit bytes: a longer text keeps its head and its last ~1 KiB,
//     with " ... (N bytes cut) ... " between them, N counting the bytes of s
//     left out.
//
// Text that already obeys these rules is returned unchanged, and
// Clean(Clean(s)) == Clean(s).
func Clean(s string) string {
	if len(s) <= Limit && clean(s) {
		return s
	}
	whole, n := escape(s, Limit)
	if n == len(s) {
		return string(whole)
	}
	head, hi := escape(s, Limit-markerMax-tailBudget)
	tail, ti := escapeBack(s, hi, tailBudget)
	out := append(head, " ... ("...)
	out = strconv.AppendInt(out, int64(ti-hi), 10)
	out = append(out, " bytes cut) ... "...)
	return string(append(out, tail...))
}

// clean reports whether s holds only valid UTF-8 and no character that
// Clean escapes.
func clean(s string) bool {
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if escapedASCII(b) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || escapedRune(r) {
			return false
		}
		i += size
	}
	return true
}

// escape appends the cleaned form of s to a new buffer, unit by unit (a
// rune, or an invalid byte), until the next unit would take the buffer
// past budget bytes; it returns the buffer and the index of the first
// unit not taken.
func escape(s string, budget int) ([]byte, int) {
	out := make([]byte, 0, min(len(s), budget))
	i := 0
	for i < len(s) {
		unit, size := cleanUnit(s[i:])
		if len(out)+len(unit) > budget {
			break
		}
		out = append(out, unit...)
		i += size
	}
	return out, i
}

// escapeBack is escape from the end of s backwards, never before stop: it
// returns the cleaned form of s[i:] for the smallest i ≥ stop whose form
// fits in budget bytes, and i. Go decodes an invalid byte as one unit in
// both directions, so the units are the ones escape sees.
func escapeBack(s string, stop, budget int) ([]byte, int) {
	var units []string
	n, i := 0, len(s)
	for i > stop {
		_, size := utf8.DecodeLastRuneInString(s[stop:i])
		unit, _ := cleanUnit(s[i-size : i])
		if n+len(unit) > budget {
			break
		}
		units = append(units, unit)
		n += len(unit)
		i -= size
	}
	out := make([]byte, 0, n)
	for k := len(units) - 1; k >= 0; k-- {
		out = append(out, units[k]...)
	}
	return out, i
}

// cleanUnit returns the cleaned form of the first unit of s (a rune, or an
// invalid byte) and the unit's length in s.
func cleanUnit(s string) (string, int) {
	if b := s[0]; b < utf8.RuneSelf {
		if escapedASCII(b) {
			return hexByte(b), 1
		}
		return s[:1], 1
	}
	r, size := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && size == 1:
		return hexByte(s[0]), 1
	case escapedRune(r):
		return `\u` + hex4(r), size
	}
	return s[:size], size
}

// escapedASCII reports whether Clean escapes the ASCII byte b: the C0
// controls other than tab and newline, and DEL.
func escapedASCII(b byte) bool {
	return b < 0x20 && b != '\n' && b != '\t' || b == 0x7f
}

// escapedRune reports whether Clean escapes the non-ASCII rune r: the C1
// controls, and the bidirectional embeddings, overrides and isolates
// (U+202A–U+202E, U+2066–U+2069) that make a terminal show text in another
// order than it is stored ("Trojan Source", CVE-2021-42574).
func escapedRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

const hexDigits = "0123456789abcdef"

func hexByte(b byte) string {
	return string([]byte{'\\', 'x', hexDigits[b>>4], hexDigits[b&0xf]})
}

func hex4(r rune) string {
	return string([]byte{hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf]})
}

// FirstLine is s up to its first newline or semicolon: the head of a
// message whose details follow, for a one-line column.
func FirstLine(s string) string {
	if i := strings.IndexAny(s, ";\n"); i > 0 {
		return s[:i]
	}
	return s
}
