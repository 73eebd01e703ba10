package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// live is a progress display. On a terminal it is one status line redrawn
// in place with \r, with events printed above it; elsewhere (a pipe, a CI
// log) it prints a plain status line at most once per plainEvery, and
// events as plain lines. A nil *live prints nothing.
type live struct {
	w          io.Writer
	tty        bool
	width      int
	plainEvery time.Duration

	mu        sync.Mutex
	lastPlain time.Time
	lastLine  string // last line printed off a terminal
	drawn     bool
}

// newLive returns a display on w, or nil when enabled is false.
func newLive(w io.Writer, enabled bool) *live {
	if !enabled {
		return nil
	}
	l := &live{w: w, plainEvery: time.Second}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		l.tty = true
		if wd, _, err := term.GetSize(int(f.Fd())); err == nil && wd > 20 {
			l.width = wd
		}
	}
	return l
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// status replaces the status line. Off a terminal, it prints only when
// force is set or plainEvery has passed since the last one.
func (l *live) status(line string, force bool) {
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

// event prints a line that stays, above the status line.
func (l *live) event(line string) {
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

// clear removes the status line from a terminal.
func (l *live) clear() {
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
