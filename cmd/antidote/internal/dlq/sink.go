package dlq

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/deadletter"
)

// letterSink writes letters as they are read: a table that streams, JSON
// Lines, or a stream of YAML documents.
type letterSink interface {
	letter(e dlqEntry) error
	// close writes what is buffered; n is the number of letters written.
	close(n int) error
}

func newLetterSink(w io.Writer, output string, noHeaders bool, now time.Time) letterSink {
	fw := newFlushWriter(w)
	switch output {
	case "json":
		return &jsonLinesSink{w: fw, enc: json.NewEncoder(fw)}
	case "yaml":
		return &yamlSink{w: fw}
	}
	t := &tableSink{w: fw, now: now, wide: output == "wide"}
	t.table = newStreamTable(fw, t.header(), noHeaders)
	return t
}

// flushWriter buffers writes and flushes them at least every
// flushEvery, so that a stream of small lines costs few system calls and
// the first line still shows at once.
type flushWriter struct {
	mu   sync.Mutex
	bw   *bufio.Writer
	err  error
	stop chan struct{}
	done chan struct{}
}

const flushEvery = 100 * time.Millisecond

func newFlushWriter(w io.Writer) *flushWriter {
	f := &flushWriter{bw: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				f.mu.Lock()
				if f.err == nil {
					f.err = f.bw.Flush()
				}
				f.mu.Unlock()
			}
		}
	}()
	return f
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.bw.Write(p)
	f.err = err
	return n, err
}

// close stops the flushing and writes what is left.
func (f *flushWriter) close() error {
	close(f.stop)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = f.bw.Flush()
	}
	return f.err
}

type jsonLinesSink struct {
	w   *flushWriter
	enc *json.Encoder
}

func (s *jsonLinesSink) letter(e dlqEntry) error { return s.enc.Encode(letterJSON(e)) }
func (s *jsonLinesSink) close(int) error         { return s.w.close() }

type yamlSink struct{ w *flushWriter }

func (s *yamlSink) letter(e dlqEntry) error {
	if _, err := io.WriteString(s.w, "---\n"); err != nil {
		return err
	}
	return writeDLQYAML(s.w, letterJSON(e))
}
func (s *yamlSink) close(int) error { return s.w.close() }

// writeDLQYAML writes v as YAML, with the field names of its JSON form.
func writeDLQYAML(w io.Writer, v any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

type tableSink struct {
	w     *flushWriter
	table *streamTable
	now   time.Time
	wide  bool
}

func (s *tableSink) header() []string {
	if s.wide {
		return []string{"PARTITION", "OFFSET", "TIMESTAMP", "DIALECT", "ORIGINAL", "STAGE", "CLASS", "ATTEMPTS", "GROUP", "REDRIVES", "KEY", "REASON", "AGE"}
	}
	return []string{"PARTITION", "OFFSET", "DIALECT", "ORIGINAL", "STAGE", "CLASS", "REDRIVES", "REASON", "AGE"}
}

func (s *tableSink) letter(e dlqEntry) error {
	l := e.l
	redrives := strconv.Itoa(l.Redrives)
	if s.wide {
		if l.RedrivenFrom != "" {
			redrives += " (" + l.RedrivenFrom + ")"
		}
		attempts := "-"
		if l.Attempts > 0 {
			attempts = strconv.Itoa(l.Attempts)
		}
		return s.table.row([]string{
			strconv.Itoa(int(l.Record.Partition)), strconv.FormatInt(l.Record.Offset, 10),
			l.Record.Timestamp.UTC().Format(deadletter.TimeLayout), l.Dialect.String(), originalText(l),
			cli.Dash(l.Stage), cli.Dash(l.Class), attempts, cli.Dash(l.Group), redrives, keyText(l.Record.Key),
			cli.Clip(reasonText(e), 160), cli.Age(s.now, l.Record.Timestamp),
		})
	}
	return s.table.row([]string{
		strconv.Itoa(int(l.Record.Partition)), strconv.FormatInt(l.Record.Offset, 10), l.Dialect.String(),
		cli.Clip(originalText(l), 48), cli.Dash(l.Stage), cli.Dash(l.Class), redrives, cli.Clip(reasonText(e), 72), cli.Age(s.now, l.Record.Timestamp),
	})
}

func (s *tableSink) close(n int) error {
	err := s.table.close()
	if n == 0 && err == nil {
		_, err = io.WriteString(s.w, "no dead letters\n")
	}
	if cerr := s.w.close(); err == nil {
		err = cerr
	}
	return err
}

// keyText is a record key for a table cell.
func keyText(k []byte) string {
	switch {
	case k == nil:
		return "(null)"
	case printable(k):
		return cli.Clip(string(k), 40)
	}
	return "0x" + cli.Clip(fmt.Sprintf("%x", k), 40)
}

// streamTable writes aligned columns without holding the whole table:
// the column widths are taken from the first rows (up to tableSample,
// or those that came within tableWait), then kept; a longer cell later
// pushes its line out rather than waiting. Cells are made safe for a
// terminal.
type streamTable struct {
	mu        sync.Mutex
	w         io.Writer
	header    []string
	noHeaders bool
	rows      [][]string
	widths    []int
	fixed     bool
	timer     *time.Timer
	err       error
}

const (
	tableSample = 100
	tableWait   = 200 * time.Millisecond
)

func newStreamTable(w io.Writer, header []string, noHeaders bool) *streamTable {
	return &streamTable{w: w, header: header, noHeaders: noHeaders}
}

func (t *streamTable) row(cells []string) error {
	for i, c := range cells {
		cells[i] = cli.Safe(c)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if t.fixed {
		t.write(cells)
		return t.err
	}
	t.rows = append(t.rows, cells)
	if len(t.rows) == 1 {
		t.timer = time.AfterFunc(tableWait, func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.fix()
		})
	}
	if len(t.rows) >= tableSample {
		t.fix()
	}
	return t.err
}

// fix sets the widths and writes the rows held; t.mu is held.
func (t *streamTable) fix() {
	if t.fixed {
		return
	}
	t.fixed = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.widths = make([]int, len(t.header))
	measure := func(cells []string) {
		for i, c := range cells {
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
		}
	}
	if !t.noHeaders {
		measure(t.header)
	}
	for _, r := range t.rows {
		measure(r)
	}
	if !t.noHeaders {
		t.write(t.header)
	}
	for _, r := range t.rows {
		t.write(r)
	}
	t.rows = nil
}

func (t *streamTable) write(cells []string) {
	if t.err != nil {
		return
	}
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i == len(cells)-1 {
			break
		}
		b.WriteString(strings.Repeat(" ", max(t.widths[i]-utf8.RuneCountInString(c), 0)+2))
	}
	b.WriteByte('\n')
	_, t.err = io.WriteString(t.w, b.String())
}

// close writes the rows still held (when there were any).
func (t *streamTable) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.rows) > 0 {
		t.fix()
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	return t.err
}
