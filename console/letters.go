package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// topicRow is one line of the topic list.
type topicRow struct {
	Name       string
	Partitions int
	Records    int64
	Err        string
}

func (h *Handler) topicsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.IdleTimeout)
	defer cancel()
	cl, done, err := h.reader(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer done()
	names := slices.Clone(h.cfg.Topics)
	for _, n := range h.names {
		for _, d := range h.cfg.Consumers[n].Stats().DeadLetterTopics {
			names = append(names, d.Topic)
		}
	}
	var listErr string
	if len(h.cfg.Topics) == 0 {
		ts, err := kadm.NewClient(cl).ListTopics(ctx)
		if err != nil {
			listErr = "listing the topics: " + err.Error()
		}
		for _, t := range ts.Sorted() {
			if looksDeadLetter(t.Topic) {
				names = append(names, t.Topic)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	rows := make([]topicRow, 0, len(names))
	for _, n := range names {
		row := topicRow{Name: n}
		starts, ends, err := deadletter.Bounds(ctx, cl, n)
		if err != nil {
			row.Err = strings.ReplaceAll(err.Error(), "deadletter: ", "")
		}
		row.Partitions = len(ends)
		for p, e := range ends {
			row.Records += e - starts[p]
		}
		rows = append(rows, row)
	}
	h.render(w, r, http.StatusOK, "topics", map[string]any{"Topics": rows, "Consumers": h.names, "Error": listErr})
}

// looksDeadLetter reports whether a topic's name says it holds dead
// letters.
func looksDeadLetter(name string) bool {
	if strings.HasPrefix(name, "__") {
		return false
	}
	n := strings.ToLower(name)
	for _, s := range []string{"dlq", "dlt", "dead-letter", "deadletter", "dead_letter"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func (h *Handler) openTopic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	if !validTopic(name) {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a legal topic name", deadletter.Truncate(name, 64)))
		return
	}
	http.Redirect(w, r, h.prefix+"topics/"+name, http.StatusSeeOther)
}

// filterForm is the filter of the table, as the query string (GET) or the
// redrive form (POST) holds it: the flags of antidote dlq ls.
type filterForm struct {
	OriginalTopic, Stage, Class, Reason, Since, Until, Key string
	// Filter is the filter the fields give ([deadletter.ParseWhen] keeps a
	// duration ago relative, as the command does).
	Filter deadletter.Filter
}

func readFilter(v url.Values) (filterForm, error) {
	get := func(k string) string { return deadletter.Truncate(strings.TrimSpace(v.Get(k)), 1024) }
	f := filterForm{
		OriginalTopic: get("original-topic"), Stage: get("stage"), Class: get("class"),
		Reason: get("reason"), Since: get("since"), Until: get("until"), Key: v.Get("key"),
	}
	f.Filter = deadletter.Filter{OriginalTopic: f.OriginalTopic, Stage: f.Stage, Class: f.Class, Reason: f.Reason}
	var err error
	if f.Filter.Since, f.Filter.MaxAge, err = deadletter.ParseWhen(f.Since); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Filter.Until, f.Filter.MinAge, err = deadletter.ParseWhen(f.Until); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	if r := f.Filter.At(time.Now()); !r.Since.IsZero() && !r.Until.IsZero() && !r.Since.Before(r.Until) {
		return f, fmt.Errorf("since %s is not before until %s", f.Since, f.Until)
	}
	return f, nil
}

// Query is the filter as a query string, for links.
func (f filterForm) Query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"original-topic": f.OriginalTopic, "stage": f.Stage, "class": f.Class, "reason": f.Reason, "since": f.Since, "until": f.Until, "key": f.Key} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// IsZero reports whether nothing is filtered.
func (f filterForm) IsZero() bool { return f.Filter.IsZero() && f.Key == "" }

// selects is the filter of antidote dlq ls: the letter filter, then the
// record key.
func (f filterForm) selects(flt deadletter.Filter, l *deadletter.Letter) bool {
	return flt.Selects(l) && (f.Key == "" || string(l.Record.Key) == f.Key)
}

// row is one letter of the table; its strings are copies, clipped.
type row struct {
	Partition     int32
	Offset        int64
	Time          time.Time
	Age           string
	Dialect       string
	Original      string
	Stage, Class  string
	Reason        string
	Summary       string
	Key           string
	Redrives      int
	Malformed     string
	OriginalTopic string
}

func (h *Handler) newRow(l *deadletter.Letter, perr error, now time.Time) row {
	rc := l.Record
	rw := row{
		Partition: rc.Partition, Offset: rc.Offset, Time: rc.Timestamp.UTC(), Age: age(now, rc.Timestamp),
		Dialect: l.Dialect.String(), Stage: visible(clip(l.Stage, 40)), Class: visible(clip(l.Class, 40)),
		Reason: visible(clip(l.Reason, 40)), Summary: visible(clip(l.Summary(), 160)), Redrives: l.Redrives,
		OriginalTopic: visible(clip(l.OriginalTopic, 120)),
	}
	if l.OriginalTopic != "" {
		rw.Original = fmt.Sprintf("%s[%d]@%d", rw.OriginalTopic, l.OriginalPartition, l.OriginalOffset)
	}
	if perr != nil {
		rw.Malformed = visible(clip(strings.ReplaceAll(perr.Error(), "deadletter: ", ""), 160))
	}
	switch {
	case h.cfg.HideValues:
		rw.Key = digestShort(rc.Key)
	case rc.Key == nil:
		rw.Key = "(null)"
	default:
		k, cut := Visible(rc.Key, 48)
		if cut {
			k += "…"
		}
		rw.Key = k
	}
	return rw
}

func digestShort(b []byte) string {
	if b == nil {
		return "(null)"
	}
	return fmt.Sprintf("%d bytes", len(b))
}

// cursor is where the next page starts: a partition and an offset in it
// (the table reads partition after partition, as antidote dlq ls does).
type cursor struct {
	Partition int32
	Offset    int64
}

func (c cursor) String() string { return fmt.Sprintf("%d-%d", c.Partition, c.Offset) }

func parseCursor(s string) (cursor, bool) {
	a, b, ok := strings.Cut(s, "-")
	p, perr := strconv.ParseInt(a, 10, 32)
	o, oerr := strconv.ParseInt(b, 10, 64)
	if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
		return cursor{}, false
	}
	return cursor{int32(p), o}, true
}

// topicData is the topic page.
type topicData struct {
	Topic     string
	Filter    filterForm
	FilterQ   template.URL // "?" and the filter's query string
	Rows      []row
	Next      template.URL // "?" and the next page's query string, "" on the last
	After     string       // this page's cursor, "" on the first
	Stats     *topicStats
	Chart     *chart
	By        string
	Error     string
	Scanned   int
	Warn      string
	PageSize  int
	Consumers []string
}

func (h *Handler) topicPage(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if !validTopic(topic) {
		h.fail(w, r, http.StatusBadRequest, "not a legal topic name")
		return
	}
	q := r.URL.Query()
	f, ferr := readFilter(q)
	d := &topicData{Topic: topic, Filter: f, FilterQ: template.URL("?" + f.Query().Encode()), PageSize: h.cfg.PageSize, By: q.Get("by")}
	switch d.By {
	case "stage", "class", "reason":
	default:
		d.By = "reason"
	}
	if ferr != nil {
		d.Error = ferr.Error()
		h.render(w, r, http.StatusBadRequest, "topic", d)
		return
	}
	var after *cursor
	if s := q.Get("after"); s != "" {
		c, ok := parseCursor(s)
		if !ok {
			h.fail(w, r, http.StatusBadRequest, "malformed page cursor")
			return
		}
		after, d.After = &c, c.String()
	}
	now := time.Now()
	flt := f.Filter.At(now)
	ctx := r.Context()
	cl, done, err := h.reader(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer done()

	cfg := deadletter.ScanConfig{Topic: topic, IdleTimeout: h.cfg.IdleTimeout}
	if after != nil {
		mctx, cancel := context.WithTimeout(ctx, h.cfg.IdleTimeout)
		_, ends, err := deadletter.Bounds(mctx, cl, topic)
		cancel()
		if err != nil {
			h.scanFailed(w, r, d, err)
			return
		}
		for p := range ends {
			if p >= after.Partition {
				cfg.Partitions = append(cfg.Partitions, p)
			}
		}
		if len(cfg.Partitions) == 0 {
			h.render(w, r, http.StatusOK, "topic", d)
			return
		}
		cfg.From = map[int32]int64{after.Partition: after.Offset}
	} else {
		// The first page counts every selected letter while it reads.
		d.Stats = newTopicStats(d.By)
	}
	var unreadable int
	err = deadletter.Scan(ctx, cl, cfg, func(rec *kgo.Record) error {
		d.Scanned++
		l, perr := deadletter.ParseRecord(rec)
		if perr != nil {
			unreadable++
		}
		if !f.selects(flt, l) {
			return nil
		}
		if d.Stats != nil {
			d.Stats.add(l, perr)
		}
		if len(d.Rows) < h.cfg.PageSize {
			d.Rows = append(d.Rows, h.newRow(l, perr, now))
			return nil
		}
		if d.Next == "" {
			nq := f.Query()
			nq.Set("after", cursor{rec.Partition, rec.Offset}.String())
			if d.By != "reason" {
				nq.Set("by", d.By)
			}
			d.Next = template.URL("?" + nq.Encode())
		}
		if d.Stats == nil {
			return deadletter.ErrStop
		}
		return nil
	})
	if err != nil {
		h.scanFailed(w, r, d, err)
		return
	}
	if d.Scanned > 0 && unreadable == d.Scanned {
		d.Warn = fmt.Sprintf("none of the %d records read is a readable dead letter (no or malformed failure headers): this is probably not a dead-letter topic", d.Scanned)
	}
	if d.Stats != nil {
		d.Stats.finish()
		d.Chart = d.Stats.chart()
	}
	h.render(w, r, http.StatusOK, "topic", d)
}

func (h *Handler) scanFailed(w http.ResponseWriter, r *http.Request, d *topicData, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, deadletter.ErrUnknownTopic) {
		status = http.StatusNotFound
		d.Error = fmt.Sprintf("topic %q does not exist", d.Topic)
	} else {
		d.Error = strings.ReplaceAll(err.Error(), "deadletter: ", "")
	}
	d.Rows, d.Stats, d.Chart, d.Next = nil, nil, nil, ""
	h.render(w, r, status, "topic", d)
}

// readOne reads the record at partition:offset of topic, as antidote dlq
// show does.
func (h *Handler) readOne(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset int64) (*kgo.Record, error) {
	mctx, cancel := context.WithTimeout(ctx, h.cfg.IdleTimeout)
	starts, ends, err := deadletter.Bounds(mctx, cl, topic)
	cancel()
	if err != nil {
		return nil, err
	}
	end, ok := ends[partition]
	switch {
	case !ok:
		return nil, fmt.Errorf("topic %q has no partition %d (it has %d)", topic, partition, len(ends))
	case offset < starts[partition]:
		return nil, fmt.Errorf("no record at %d:%d: the log of partition %d starts at offset %d", partition, offset, partition, starts[partition])
	case offset >= end:
		return nil, fmt.Errorf("no record at %d:%d: partition %d ends before offset %d", partition, offset, partition, end)
	}
	var got *kgo.Record
	err = deadletter.Scan(ctx, cl, deadletter.ScanConfig{
		Topic: topic, Partitions: []int32{partition}, IdleTimeout: h.cfg.IdleTimeout,
		From: map[int32]int64{partition: offset}, To: map[int32]int64{partition: offset + 1},
	}, func(r *kgo.Record) error {
		got = r
		return deadletter.ErrStop
	})
	if err != nil {
		return nil, err
	}
	if got == nil || got.Offset != offset {
		return nil, fmt.Errorf("no record at %d:%d (compacted away, or a transaction marker)", partition, offset)
	}
	return got, nil
}

// fact is one line of the letter's failure, in plain words.
type fact struct {
	Label, Value, Help string
}

// headerRow is one header of the letter page.
type headerRow struct {
	Key, Kind, Value, Decoded string
	Cut                       bool
}

type letterData struct {
	Topic     string
	Partition int32
	Offset    int64
	Time      time.Time
	Age       string
	Dialect   string
	Malformed string
	Summary   string
	Origin    []fact
	Failure   []fact
	Key       blob
	Value     blob
	Blobs     []blob // Key and Value
	Headers   []headerRow
	Counts    string
	Stack     string
	StackCut  bool
	Full      bool
	As        string
	Self      string // the page's path
	Redrive   bool   // a letter that can be redriven
}

func (h *Handler) letterPage(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	p, perr := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	o, oerr := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if !validTopic(topic) || perr != nil || oerr != nil || p < 0 || o < 0 {
		h.fail(w, r, http.StatusBadRequest, "want /topics/TOPIC/letters/PARTITION/OFFSET")
		return
	}
	q := r.URL.Query()
	as := q.Get("as")
	switch as {
	case "", "auto", "text", "json", "hex", "decoded":
	default:
		h.fail(w, r, http.StatusBadRequest, "as: want auto, text, json, hex or decoded")
		return
	}
	full := q.Get("full") == "1"
	ctx := r.Context()
	cl, done, err := h.reader(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer done()
	rec, err := h.readOne(ctx, cl, topic, int32(p), o)
	if err != nil {
		status := http.StatusNotFound
		if !errors.Is(err, deadletter.ErrUnknownTopic) && !strings.HasPrefix(err.Error(), "no record") && !strings.Contains(err.Error(), "has no partition") {
			status = http.StatusBadGateway
		}
		h.fail(w, r, status, strings.ReplaceAll(err.Error(), "deadletter: ", ""))
		return
	}
	l, lerr := deadletter.ParseRecord(rec)
	now := time.Now()
	limit := h.cfg.ShowBytes
	if full {
		limit = 0
	}
	d := &letterData{
		Topic: topic, Partition: rec.Partition, Offset: rec.Offset, Time: rec.Timestamp.UTC(), Age: age(now, rec.Timestamp),
		Dialect: dialectName(l.Dialect), Summary: visible(clip(l.Summary(), 300)), Full: full, As: as,
		Self:    fmt.Sprintf("%stopics/%s/letters/%d/%d", h.prefix, topic, rec.Partition, rec.Offset),
		Redrive: lerr == nil && l.Dialect != deadletter.DialectUnknown,
	}
	if lerr != nil {
		d.Malformed = visible(strings.ReplaceAll(lerr.Error(), "deadletter: ", ""))
	}
	d.Origin, d.Failure = facts(l)
	var dk, dv string
	var ek, ev error
	if h.cfg.Decode != nil && !h.cfg.HideValues && l.OriginalTopic != "" {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if rec.Key != nil {
			dk, ek = h.cfg.Decode(dctx, l.OriginalTopic, true, rec.Key)
		}
		if rec.Value != nil {
			dv, ev = h.cfg.Decode(dctx, l.OriginalTopic, false, rec.Value)
		}
		cancel()
	}
	d.Key = showBytes("key", rec.Key, as, limit, h.cfg.HideValues, dk, ek)
	d.Value = showBytes("value", rec.Value, as, limit, h.cfg.HideValues, dv, ev)
	d.Blobs = []blob{d.Key, d.Value}
	kinds := l.HeaderKinds()
	for i, hd := range l.Record.Headers {
		hr := headerRow{Key: visible(clip(hd.Key, 200)), Kind: string(kinds[i]), Decoded: deadletter.SpringNumber(hd)}
		if h.cfg.HideValues && kinds[i] != deadletter.KindFailure {
			hr.Value = digest(hd.Value)
		} else {
			hl := 4096
			if full {
				hl = 0
			}
			hr.Value, hr.Cut = headerValue(hd, hl)
		}
		d.Headers = append(d.Headers, hr)
	}
	nf := len(l.Record.Headers) - len(l.OriginalHeaders) - len(l.Metadata)
	d.Counts = fmt.Sprintf("%d headers: %d original, %d failure", len(l.Record.Headers), len(l.OriginalHeaders), nf)
	if len(l.Metadata) > 0 {
		d.Counts += fmt.Sprintf(", %d %s metadata (never redriven)", len(l.Metadata), l.Dialect)
	}
	if l.StackTrace != "" {
		d.Stack, d.StackCut = Visible([]byte(l.StackTrace), limit)
	}
	h.render(w, r, http.StatusOK, "letter", d)
}

func dialectName(d deadletter.Dialect) string {
	switch d {
	case deadletter.DialectAntidote:
		return "Antidote"
	case deadletter.DialectSpring:
		return "Spring Kafka (DeadLetterPublishingRecoverer)"
	case deadletter.DialectConnect:
		return "Kafka Connect (dead-letter queue of a sink connector)"
	case deadletter.DialectStreams:
		return "Kafka Streams (KIP-1034 dead-letter queue)"
	case deadletter.DialectShareGroup:
		return "share group (KIP-1191, written by the broker)"
	}
	return "unknown: no known failure headers"
}

// facts says where the letter came from and why it failed, in plain words.
func facts(l *deadletter.Letter) (origin, failure []fact) {
	add := func(dst *[]fact, label, value, help string) {
		if value != "" {
			*dst = append(*dst, fact{label, visible(clip(value, 2000)), help})
		}
	}
	if l.OriginalTopic != "" {
		add(&origin, "topic", l.OriginalTopic, "")
		if l.OriginalPartition >= 0 {
			add(&origin, "partition", strconv.Itoa(int(l.OriginalPartition)), "")
		}
		if l.OriginalOffset >= 0 {
			add(&origin, "offset", strconv.FormatInt(l.OriginalOffset, 10), "")
		}
	}
	if !l.OriginalTimestamp.IsZero() {
		ts := l.OriginalTimestamp.UTC().Format(deadletter.TimeLayout)
		if l.OriginalTimestampType != "" {
			ts += " (" + l.OriginalTimestampType + ")"
		}
		add(&origin, "timestamp", ts, "")
	}
	add(&origin, "consumer group", l.Group, "")
	add(&origin, "client id", l.ClientID, "")
	add(&origin, "connector", l.Connector, "")
	if l.Task >= 0 {
		add(&origin, "task", strconv.Itoa(l.Task), "")
	}

	stageHelp := map[string]string{
		"deserialize-key":   "the record's key could not be read (deserialized)",
		"deserialize-value": "the record's value could not be read (deserialized)",
		"process":           "the handler failed on the record",
		"KEY_CONVERTER":     "Connect's key converter could not read the key",
		"VALUE_CONVERTER":   "Connect's value converter could not read the value",
		"HEADER_CONVERTER":  "Connect's header converter could not read a header",
		"TRANSFORMATION":    "a Connect transformation (SMT) failed",
		"TASK_PUT":          "the sink task failed to write the record",
	}
	classHelp := map[string]string{
		"permanent":    "retrying cannot help (corrupt bytes, a rejected record)",
		"transient":    "it might succeed later (a dependency was down)",
		"unclassified": "the error said neither; treated by the stage's default",
	}
	reasonHelp := map[string]string{
		"permanent":               "dead-lettered at once: the failure is permanent",
		"retries-exhausted":       fmt.Sprintf("retried %d times, then dead-lettered", l.Attempts),
		"retry-disabled":          "retrying was switched off (the kill switch), so it was dead-lettered",
		"operator":                "an operator sent the record its partition was stuck on here",
		"operator-rescue":         "an operator took the record its consumer group was stuck on out of the way (antidote group rescue)",
		"client-rejected":         "a share-group consumer rejected the record",
		"delivery-count-exceeded": "delivered too many times to a share group",
	}
	add(&failure, "stage", l.Stage, stageHelp[l.Stage])
	add(&failure, "class", l.Class, classHelp[l.Class])
	add(&failure, "reason", l.Reason, reasonHelp[l.Reason])
	add(&failure, "error type", l.ErrorType, "")
	add(&failure, "cause type", l.CauseType, "")
	add(&failure, "message", strings.Join(strings.Fields(l.Message), " "), "")
	add(&failure, "root cause", l.RootCause(), "the last “Caused by” of the stack trace")
	add(&failure, "failed in", l.Executor, "")
	if l.Attempts > 0 {
		add(&failure, "attempts", strconv.Itoa(l.Attempts), "")
	}
	if !l.FirstFailure.IsZero() {
		add(&failure, "first failure", l.FirstFailure.UTC().Format(deadletter.TimeLayout), "")
		add(&failure, "last failure", l.LastFailure.UTC().Format(deadletter.TimeLayout), "")
	}
	add(&failure, "redrives", strconv.Itoa(l.Redrives), "how often the record was redriven already")
	add(&failure, "redriven from", l.RedrivenFrom, "")
	return origin, failure
}

// Statistics of the topic page: bounded whatever the topic's size.

const (
	maxKeys    = 40  // distinct stages, classes, reasons counted; more go to "(other)"
	maxTop     = 100 // error summaries tracked (space-saving)
	maxBuckets = 120 // time buckets of the chart
)

type counted struct {
	Key   string
	Count int
}

type topicStats struct {
	Total, Malformed int
	by               string
	stages, classes  map[string]int
	reasons          map[string]int
	top              map[string]int // space-saving top errors
	Stages, Classes  []counted
	Reasons, Top     []counted
	width            time.Duration
	buckets          map[int64]map[string]int // bucket start (unix seconds / width) -> series -> count
	First, Last      time.Time
}

// bucket widths of the chart, finest first.
var widths = []time.Duration{
	time.Second, 10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour,
	6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour,
}

func newTopicStats(by string) *topicStats {
	return &topicStats{
		by: by, stages: map[string]int{}, classes: map[string]int{}, reasons: map[string]int{},
		top: map[string]int{}, width: widths[0], buckets: map[int64]map[string]int{},
	}
}

// reasonOf is the reason the chart and the counts use: Antidote's or a
// share group's reason, else the error type.
func reasonOf(l *deadletter.Letter) string {
	switch {
	case l.Reason != "":
		return l.Reason
	case l.ErrorType != "":
		t := l.ErrorType
		if i := strings.LastIndexAny(t, "."); i >= 0 && i < len(t)-1 {
			t = t[i+1:]
		}
		return t
	}
	return "(none)"
}

func bounded(m map[string]int, k string) {
	if _, ok := m[k]; !ok && len(m) >= maxKeys {
		k = "(other)"
	}
	m[strings.Clone(k)]++
}

func (s *topicStats) add(l *deadletter.Letter, perr error) {
	s.Total++
	if perr != nil {
		s.Malformed++
	}
	stage, class, reason := clip(l.Stage, 60), clip(l.Class, 60), clip(reasonOf(l), 60)
	if stage == "" {
		stage = "(none)"
	}
	if class == "" {
		class = "(none)"
	}
	bounded(s.stages, stage)
	bounded(s.classes, class)
	bounded(s.reasons, reason)
	s.addTop(clip(l.Summary(), 200))

	ts := l.Record.Timestamp
	if s.First.IsZero() || ts.Before(s.First) {
		s.First = ts
	}
	if ts.After(s.Last) {
		s.Last = ts
	}
	series := reason
	switch s.by {
	case "stage":
		series = stage
	case "class":
		series = class
	}
	b := floorDiv(ts.Unix(), int64(s.width/time.Second))
	m := s.buckets[b]
	if m == nil {
		m = map[string]int{}
		s.buckets[b] = m
	}
	if _, ok := m[series]; !ok && len(m) >= maxKeys {
		series = "(other)"
	}
	if _, ok := m[series]; !ok {
		series = strings.Clone(series)
	}
	m[series]++
	// The chart's span, not only its occupied buckets, stays within
	// maxBuckets: a bar is never thinner than the chart can show.
	for s.span() > maxBuckets {
		s.coarsen()
	}
}

// span is the number of buckets from the first letter to the last.
func (s *topicStats) span() int64 {
	w := int64(s.width / time.Second)
	return floorDiv(s.Last.Unix(), w) - floorDiv(s.First.Unix(), w) + 1
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// coarsen moves the chart to the next bucket width.
func (s *topicStats) coarsen() {
	next := s.width * 2
	for _, w := range widths {
		if w > s.width {
			next = w
			break
		}
	}
	old := s.buckets
	s.buckets = map[int64]map[string]int{}
	for b, m := range old {
		nb := floorDiv(b*int64(s.width/time.Second), int64(next/time.Second))
		dst := s.buckets[nb]
		if dst == nil {
			dst = map[string]int{}
			s.buckets[nb] = dst
		}
		for k, v := range m {
			dst[k] += v
		}
	}
	s.width = next
}

// addTop counts an error summary with the space-saving algorithm: at
// most maxTop are tracked, and a new one takes the place of the least
// counted (and inherits its count, an upper bound).
func (s *topicStats) addTop(k string) {
	if _, ok := s.top[k]; ok {
		s.top[k]++
		return
	}
	if len(s.top) < maxTop {
		s.top[strings.Clone(k)] = 1
		return
	}
	minK, minV := "", -1
	for key, v := range s.top {
		if minV < 0 || v < minV {
			minK, minV = key, v
		}
	}
	delete(s.top, minK)
	s.top[strings.Clone(k)] = minV + 1
}

func sorted(m map[string]int, n int) []counted {
	out := make([]counted, 0, len(m))
	for k, v := range m {
		out = append(out, counted{visible(k), v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

func (s *topicStats) finish() {
	s.Stages, s.Classes, s.Reasons = sorted(s.stages, 0), sorted(s.classes, 0), sorted(s.reasons, 0)
	s.Top = sorted(s.top, 10)
}
