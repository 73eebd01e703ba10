package dlq

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/deadletter"
)

func writeDLQJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dlqOriginalJSON is where a letter's record came from; unknown fields are
// null.
type dlqOriginalJSON struct {
	Topic         *string    `json:"topic"`
	Partition     *int32     `json:"partition"`
	Offset        *int64     `json:"offset"`
	Timestamp     *time.Time `json:"timestamp"`
	TimestampType string     `json:"timestamp_type,omitempty"`
}

// dlqLetterJSON is one letter in -o json output.
type dlqLetterJSON struct {
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Timestamp time.Time       `json:"timestamp"`
	Dialect   string          `json:"dialect"`
	Original  dlqOriginalJSON `json:"original"`
	Stage     string          `json:"stage,omitempty"`
	Class     string          `json:"class,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
	CauseType string          `json:"cause_type,omitempty"`
	Message   string          `json:"message,omitempty"`
	RootCause string          `json:"root_cause,omitempty"`
	Attempts  int             `json:"attempts,omitempty"`
	Group     string          `json:"group,omitempty"`
	Connector string          `json:"connector,omitempty"`
	Task      *int            `json:"task,omitempty"`
	Executor  string          `json:"executor,omitempty"`
	Redrives  int             `json:"redrives"`
	// RedrivenFrom is the dead letter the record was last redriven from.
	RedrivenFrom string `json:"redriven_from,omitempty"`
	// Error notes malformed failure headers.
	Error string `json:"error,omitempty"`
}

func letterJSON(e dlqEntry) dlqLetterJSON {
	l := e.l
	j := dlqLetterJSON{
		Partition: l.Record.Partition, Offset: l.Record.Offset, Timestamp: l.Record.Timestamp,
		Dialect: l.Dialect.String(), Stage: l.Stage, Class: l.Class, Reason: l.Reason,
		ErrorType: l.ErrorType, CauseType: l.CauseType, Message: l.Message, RootCause: l.RootCause(), Attempts: l.Attempts,
		Group: l.Group, Connector: l.Connector, Executor: l.Executor, Redrives: l.Redrives,
		RedrivenFrom: l.RedrivenFrom,
	}
	if l.OriginalTopic != "" {
		j.Original.Topic = &l.OriginalTopic
	}
	if l.OriginalPartition >= 0 {
		j.Original.Partition = &l.OriginalPartition
	}
	if l.OriginalOffset >= 0 {
		j.Original.Offset = &l.OriginalOffset
	}
	if !l.OriginalTimestamp.IsZero() {
		j.Original.Timestamp = &l.OriginalTimestamp
	}
	j.Original.TimestampType = l.OriginalTimestampType
	if l.Task >= 0 {
		j.Task = &l.Task
	}
	if e.err != nil {
		j.Error = cleanErr(e.err)
	}
	return j
}

// cleanErr is a parse error on one line, without the package prefix.
func cleanErr(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "deadletter: ", "")), " ")
}

func originalText(l *deadletter.Letter) string {
	if l.OriginalTopic == "" {
		return "-"
	}
	s := l.OriginalTopic
	if l.OriginalPartition >= 0 {
		s += "[" + strconv.Itoa(int(l.OriginalPartition)) + "]"
	}
	if l.OriginalOffset >= 0 {
		s += "@" + strconv.FormatInt(l.OriginalOffset, 10)
	}
	return s
}

// shortType drops a Java package: org.apache.kafka.X -> X.
func shortType(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 && !strings.ContainsAny(s, " *") {
		return s[i+1:]
	}
	return s
}

func reasonText(e dlqEntry) string {
	if e.err != nil && e.l.Dialect != deadletter.DialectUnknown {
		return "! malformed: " + cleanErr(e.err)
	}
	l := e.l
	typ := l.CauseType
	if typ == "" {
		typ = l.ErrorType
	}
	parts := []string{}
	if l.Reason != "" && l.Dialect == deadletter.DialectAntidote {
		parts = append(parts, l.Reason)
	}
	msg := strings.Join(strings.Fields(l.Message), " ")
	if rc := l.RootCause(); rc != "" {
		// The innermost cause says why ("failed to deserialize" does
		// not).
		typ, msg, _ = strings.Cut(rc, ": ")
		msg = strings.TrimSpace(msg)
	}
	switch {
	case typ != "" && msg != "":
		parts = append(parts, shortType(typ)+": "+msg)
	case typ != "":
		parts = append(parts, shortType(typ))
	case msg != "":
		parts = append(parts, msg)
	}
	return cli.Dash(strings.Join(parts, " "))
}

// Show.

// dlqBytesJSON is a key or a value in -o json output.
type dlqBytesJSON struct {
	As   string          `json:"as"` // null, text, json, hex
	Text *string         `json:"text,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
	Hex  string          `json:"hex,omitempty"`
	Size int             `json:"size"`
	Note string          `json:"note,omitempty"`
}

type dlqHeaderJSON struct {
	Key     string  `json:"key"`
	Kind    string  `json:"kind"`              // original, failure or metadata
	Value   *string `json:"value"`             // the value as text, when printable
	Hex     string  `json:"hex,omitempty"`     // the value in hex, when not
	Decoded string  `json:"decoded,omitempty"` // a binary value decoded
}

type dlqShowOut struct {
	Topic string `json:"topic"`
	dlqLetterJSON
	StackTrace      string          `json:"stack_trace,omitempty"`
	Key             dlqBytesJSON    `json:"key"`
	Value           dlqBytesJSON    `json:"value"`
	Headers         []dlqHeaderJSON `json:"headers"`
	OriginalHeaders int             `json:"original_headers"`
	MetadataHeaders int             `json:"metadata_headers"`
}

func dlqShowJSON(e dlqEntry, as string) dlqShowOut {
	l := e.l
	out := dlqShowOut{
		Topic: l.Record.Topic, dlqLetterJSON: letterJSON(e), StackTrace: l.StackTrace,
		Key: bytesJSON(l.Record.Key, as), Value: bytesJSON(l.Record.Value, as),
		OriginalHeaders: len(l.OriginalHeaders), MetadataHeaders: len(l.Metadata),
	}
	kinds := l.HeaderKinds()
	for i, h := range l.Record.Headers {
		j := dlqHeaderJSON{Key: h.Key, Kind: string(kinds[i]), Decoded: decodeBinary(h)}
		if h.Value != nil && printable(h.Value) {
			s := string(h.Value)
			j.Value = &s
		} else if h.Value != nil {
			j.Hex = hex.EncodeToString(h.Value)
		}
		out.Headers = append(out.Headers, j)
	}
	return out
}

// render decides how to show b: "null", "text", "json" or "hex", and a
// note when the forced form does not fit.
func render(b []byte, as string) (form, note string) {
	if b == nil {
		return "null", ""
	}
	isText := printable(b)
	isJSON := isText && json.Valid(b) && len(bytes.TrimSpace(b)) > 0
	switch as {
	case "text":
		if !isText {
			note = "not printable UTF-8: non-printable bytes are escaped"
		}
		return "text", note
	case "json":
		if !isJSON {
			return "hex", "not valid JSON"
		}
		return "json", ""
	case "hex":
		return "hex", ""
	}
	switch {
	case isJSON:
		return "json", ""
	case isText:
		return "text", ""
	}
	return "hex", ""
}

func bytesJSON(b []byte, as string) dlqBytesJSON {
	form, note := render(b, as)
	j := dlqBytesJSON{As: form, Size: len(b), Note: note}
	switch form {
	case "text":
		s := string(b)
		if !utf8.Valid(b) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		j.Text = &s
	case "json":
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			j.JSON = buf.Bytes()
		}
	case "hex":
		j.Hex = hex.EncodeToString(b)
	}
	return j
}

// printable reports whether b is UTF-8 text without control characters
// other than whitespace.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r == '\n' || r == '\t' || r == '\r' {
			continue
		}
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// decodeBinary shows a Spring binary header as a number ("" for other
// headers): [deadletter.SpringNumber].
func decodeBinary(h deadletter.Header) string { return deadletter.SpringNumber(h) }

func printDLQShow(w io.Writer, e dlqEntry, as string, now time.Time) error {
	l := e.l
	r := l.Record
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	// Every value may come from the letter: escaped, as dlq ls does.
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, cli.Safe(v))
		}
	}
	row("dead letter", fmt.Sprintf("%s %d:%d, %s (%s ago)", r.Topic, r.Partition, r.Offset, r.Timestamp.UTC().Format(deadletter.TimeLayout), cli.Age(now, r.Timestamp)))
	row("dialect", l.Dialect.String())
	if e.err != nil {
		row("error", "! "+cleanErr(e.err))
	}
	orig := originalText(l)
	if !l.OriginalTimestamp.IsZero() {
		orig += ", " + l.OriginalTimestamp.UTC().Format(deadletter.TimeLayout)
	}
	if l.OriginalTimestampType != "" {
		orig += " (" + l.OriginalTimestampType + ")"
	}
	row("original", orig)
	row("stage", l.Stage)
	row("class", l.Class)
	row("reason", l.Reason)
	row("error type", l.ErrorType)
	row("cause type", l.CauseType)
	row("message", strings.Join(strings.Fields(l.Message), " "))
	row("root cause", l.RootCause())
	if l.Attempts > 0 {
		row("attempts", strconv.Itoa(l.Attempts))
	}
	row("group", l.Group)
	row("client id", l.ClientID)
	row("connector", l.Connector)
	if l.Task >= 0 {
		row("task", strconv.Itoa(l.Task))
	}
	row("executor", l.Executor)
	if !l.FirstFailure.IsZero() {
		row("failures", l.FirstFailure.UTC().Format(deadletter.TimeLayout)+" … "+l.LastFailure.UTC().Format(deadletter.TimeLayout))
	}
	row("redrives", strconv.Itoa(l.Redrives))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(&b, "\nheaders (%d: %d original, %d failure", len(r.Headers), len(l.OriginalHeaders), len(r.Headers)-len(l.OriginalHeaders)-len(l.Metadata))
	if len(l.Metadata) > 0 {
		fmt.Fprintf(&b, ", %d %s metadata, never redriven", len(l.Metadata), l.Dialect)
	}
	fmt.Fprintln(&b, "):")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	kinds := l.HeaderKinds()
	for i, h := range r.Headers {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", cli.Safe(h.Key), kinds[i], cli.Safe(headerText(h)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, kv := range []struct {
		name string
		b    []byte
	}{{"key", r.Key}, {"value", r.Value}} {
		form, note := render(kv.b, as)
		head := fmt.Sprintf("\n%s (%s, %d bytes", kv.name, form, len(kv.b))
		if note != "" {
			head += "; " + note
		}
		fmt.Fprintln(&b, head+"):")
		switch form {
		case "null":
		case "text":
			s := string(kv.b)
			if !printable(kv.b) {
				s = strconv.Quote(s)
				s = s[1 : len(s)-1]
			}
			fmt.Fprintln(&b, indent(cli.SafeText(s)))
		case "json":
			var buf bytes.Buffer
			if json.Indent(&buf, kv.b, "", "  ") == nil {
				fmt.Fprintln(&b, indent(cli.SafeText(buf.String())))
			}
		case "hex":
			fmt.Fprint(&b, indent(strings.TrimRight(hex.Dump(kv.b), "\n"))+"\n")
		}
	}
	if l.StackTrace != "" {
		fmt.Fprintf(&b, "\nstack trace:\n%s\n", indent(cli.SafeText(strings.TrimRight(l.StackTrace, "\n"))))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// headerText is one header value on one line.
func headerText(h deadletter.Header) string {
	if d := decodeBinary(h); d != "" {
		return d + "  (binary, " + strconv.Itoa(len(h.Value)) + " bytes)"
	}
	switch {
	case h.Value == nil:
		return "(null)"
	case len(h.Value) == 0:
		return `""`
	case printable(h.Value):
		s := string(h.Value)
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			return cli.Clip(strings.TrimSpace(s[:i]), 100) + fmt.Sprintf(" … (%d lines)", strings.Count(strings.TrimRight(s, "\n"), "\n")+1)
		}
		return cli.Clip(s, 160)
	}
	return "0x" + cli.Clip(hex.EncodeToString(h.Value), 96) + "  (" + strconv.Itoa(len(h.Value)) + " bytes)"
}

// Stats.

type dlqStats struct {
	Topic           string         `json:"topic"`
	Total           int            `json:"total"`
	Malformed       int            `json:"malformed"`
	Redriven        int            `json:"redriven"`
	ByDialect       map[string]int `json:"by_dialect"`
	ByReason        map[string]int `json:"by_reason"`
	ByStage         map[string]int `json:"by_stage"`
	ByClass         map[string]int `json:"by_class"`
	ByErrorType     map[string]int `json:"by_error_type"`
	ByOriginalTopic map[string]int `json:"by_original_topic"`
	ByRedrives      map[string]int `json:"by_redrives"`

	counts [7]map[string]*int // the counts while reading, in the order above
}

// maxStatsKeys bounds the distinct values counted per section, so that
// hostile or unbounded values (an error type per letter) cannot grow the
// counts without bound; the rest count as statsOther.
const (
	maxStatsKeys = 1000
	statsOther   = "(other values)"
)

func newDLQStats(topic string) *dlqStats {
	st := &dlqStats{Topic: topic}
	for i := range st.counts {
		st.counts[i] = map[string]*int{}
	}
	return st
}

// count counts k in m. A new key is copied: the letters' strings are views
// of their fetch's memory, which a key kept in the map would hold on to
// (and a hit does not store the key again).
func count(m map[string]*int, k string) {
	if p := m[k]; p != nil {
		*p++
		return
	}
	if len(m) >= maxStatsKeys {
		k = statsOther
		if p := m[k]; p != nil {
			*p++
			return
		}
	}
	n := 1
	m[strings.Clone(k)] = &n
}

// add counts one letter.
func (st *dlqStats) add(e dlqEntry) {
	l := e.l
	st.Total++
	if e.err != nil {
		st.Malformed++
	}
	if l.Redrives > 0 {
		st.Redriven++
	}
	typ := l.CauseType
	if typ == "" {
		typ = l.ErrorType
	}
	for i, k := range [...]string{l.Dialect.String(), cli.Dash(l.Reason), cli.Dash(l.Stage), cli.Dash(l.Class), cli.Dash(typ), cli.Dash(l.OriginalTopic), strconv.Itoa(l.Redrives)} {
		count(st.counts[i], k)
	}
}

// finish fills the exported counts.
func (st *dlqStats) finish() *dlqStats {
	for i, dst := range []*map[string]int{&st.ByDialect, &st.ByReason, &st.ByStage, &st.ByClass, &st.ByErrorType, &st.ByOriginalTopic, &st.ByRedrives} {
		*dst = make(map[string]int, len(st.counts[i]))
		for k, n := range st.counts[i] {
			(*dst)[k] = *n
		}
	}
	return st
}

func printDLQStats(w io.Writer, st *dlqStats) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d dead letters", st.Topic, st.Total)
	if st.Malformed > 0 {
		fmt.Fprintf(&b, " (%d with malformed headers)", st.Malformed)
	}
	if st.Redriven > 0 {
		fmt.Fprintf(&b, ", %d redriven before", st.Redriven)
	}
	fmt.Fprintln(&b)
	if st.Total == 0 {
		_, err := io.WriteString(w, b.String())
		return err
	}
	width := len(strconv.Itoa(st.Total))
	for _, sec := range []struct {
		name string
		m    map[string]int
	}{
		{"dialect", st.ByDialect}, {"reason", st.ByReason}, {"stage", st.ByStage}, {"class", st.ByClass},
		{"error type", st.ByErrorType}, {"original topic", st.ByOriginalTopic}, {"redrives", st.ByRedrives},
	} {
		fmt.Fprintf(&b, "\nby %s:\n", sec.name)
		keys := make([]string, 0, len(sec.m))
		for k := range sec.m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if sec.m[keys[i]] != sec.m[keys[j]] {
				return sec.m[keys[i]] > sec.m[keys[j]]
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			fmt.Fprintf(&b, "  %*d  %s\n", width, sec.m[k], cli.Safe(cli.Clip(k, 100)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Redrive.

type dlqRedriveJSON struct {
	Topic       string               `json:"topic"`
	Group       string               `json:"group"`
	DryRun      bool                 `json:"dry_run"`
	ExactlyOnce bool                 `json:"exactly_once"`
	Scanned     int                  `json:"scanned"`
	Redriven    int                  `json:"redriven"`
	Refused     int                  `json:"refused"`
	Skipped     int                  `json:"skipped"`
	Targets     map[string]int       `json:"targets"`
	Refusals    []deadletter.Refusal `json:"refusals"`
}

func printRedrive(w io.Writer, output, topic string, r deadletter.RedriveResult) error {
	if output == "json" || output == "yaml" {
		refusals := r.Refusals
		if refusals == nil {
			refusals = []deadletter.Refusal{}
		}
		j := dlqRedriveJSON{
			Topic: topic, Group: r.Group, DryRun: r.DryRun, ExactlyOnce: r.ExactlyOnce, Scanned: r.Scanned, Redriven: r.Redriven,
			Refused: r.Refused, Skipped: r.Skipped, Targets: r.Targets, Refusals: refusals,
		}
		if output == "yaml" {
			return writeDLQYAML(w, j)
		}
		return writeDLQJSON(w, j)
	}
	var b strings.Builder
	verb := "redriven"
	if r.DryRun {
		verb = "would redrive"
		fmt.Fprintf(&b, "dry run: nothing was produced or committed\n")
	}
	fmt.Fprintf(&b, "redrive of %s (progress in group %s): %d read\n", topic, r.Group, r.Scanned)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	targets := make([]string, 0, len(r.Targets))
	for t, n := range r.Targets {
		targets = append(targets, fmt.Sprintf("%s: %d", t, n))
	}
	sort.Strings(targets)
	fmt.Fprintf(tw, "  %s\t%d\t%s\n", verb, r.Redriven, strings.Join(targets, ", "))
	fmt.Fprintf(tw, "  refused\t%d\t\n", r.Refused)
	fmt.Fprintf(tw, "  skipped by filter\t%d\t\n", r.Skipped)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Refusals) > 0 {
		fmt.Fprintln(&b, "refused:")
		for _, f := range r.Refusals {
			fmt.Fprintf(&b, "  %d:%d  %s\n", f.Partition, f.Offset, cli.Safe(cli.Clip(f.Reason, 120)))
		}
		if r.Refused > len(r.Refusals) {
			fmt.Fprintf(&b, "  … and %d more\n", r.Refused-len(r.Refusals))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
