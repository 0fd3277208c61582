// Package progress draws a progress bar on a terminal line, or plain log
// lines when the output is not a terminal.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bar draws "label [=====>    ] done/total suffix" on one terminal
// line, redrawn in place at most every 100 ms. When the output is not a
// terminal it prints a plain line at most every 10 s, so logs stay short.
type Bar struct {
	w        io.Writer
	label    string
	total    int
	tty      bool
	start    time.Time
	lastDraw time.Time
}

// New returns a bar of total units drawn on w.
func New(w io.Writer, label string, total int) *Bar {
	return &Bar{w: w, label: label, total: total, tty: IsTerminal(w), start: time.Now()}
}

// Update redraws the bar for done of total units.
func (p *Bar) Update(done int, suffix string) {
	now := time.Now()
	every := 100 * time.Millisecond
	if !p.tty {
		every = 10 * time.Second
	}
	if done < p.total && now.Sub(p.lastDraw) < every {
		return
	}
	p.lastDraw = now
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
	}
	filled := int(frac * width)
	bar := strings.Repeat("=", filled)
	if filled < width {
		bar += ">" + strings.Repeat(" ", width-filled-1)
	}
	line := fmt.Sprintf("%s [%s] %d/%d %s %s", p.label, bar, done, p.total, time.Since(p.start).Round(100*time.Millisecond), suffix)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		if done >= p.total {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
