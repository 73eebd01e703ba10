package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Live is a progress display. On a terminal it is one status line redrawn
// in place with \r, with events printed above it; elsewhere (a pipe, a CI
// log) it prints a plain status line at most once per plainEvery, and
// events as plain lines. A nil *live prints nothing.
type Live struct {
	w          io.Writer
	tty        bool
	width      int
	plainEvery time.Duration

	mu        sync.Mutex
	lastPlain time.Time
	lastLine  string // last line printed off a terminal
	drawn     bool
}

// NewLive returns a display on w, or nil when enabled is false.
func NewLive(w io.Writer, enabled bool) *Live {
	if !enabled {
		return nil
	}
	l := &Live{w: w, plainEvery: time.Second}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		l.tty = true
		if wd, _, err := term.GetSize(int(f.Fd())); err == nil && wd > 20 {
			l.width = wd
		}
	}
	return l
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Status replaces the status line. Off a terminal, it prints only when
// force is set or plainEvery has passed since the last one.
func (l *Live) Status(line string, force bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty {
		if l.width > 0 && len(line) >= l.width {
			line = line[:l.width-1]
		}
		fmt.Fprintf(l.w, "\r%s\x1b[K", line)
		l.drawn = true
		return
	}
	if now := time.Now(); force || now.Sub(l.lastPlain) >= l.plainEvery {
		l.lastPlain, l.lastLine = now, line
		fmt.Fprintln(l.w, line)
	}
}

// Event prints a line that stays, above the status line.
func (l *Live) Event(line string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty && l.drawn {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.drawn = false
	}
	if !l.tty && line != "" && line == l.lastLine {
		return // the final status line, already printed
	}
	l.lastLine = line
	fmt.Fprintln(l.w, line)
}

// Clear removes the status line from a terminal.
func (l *Live) Clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty && l.drawn {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.drawn = false
	}
}
