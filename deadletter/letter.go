package deadletter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is one record of a dead-letter topic, as read.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header and kgo.RecordHeader are the same type under another name; this
// conversion stops compiling if they part.
var _ = Header(kgo.RecordHeader{})

// RecordOf returns r as a [Record]. Nothing is copied: the headers and
// the byte slices are r's (Parse reads them and writes none).
func RecordOf(r *kgo.Record) Record {
	// The same memory layout (see above): a view, not a copy, which a
	// scan of millions of letters would pay for each of them.
	hs := unsafe.Slice((*Header)(unsafe.Pointer(unsafe.SliceData(r.Headers))), len(r.Headers))
	return Record{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: r.Key, Value: r.Value, Headers: hs,
	}
}

// Letter is one dead letter, read from any [Dialect]: where the record came
// from, why it failed, and the original record.
//
// Fields a dialect does not carry are left at their "unknown" value: ""
// for strings, -1 for OriginalPartition, OriginalOffset and Task, the zero
// time, 0 for Attempts.
type Letter struct {
	Dialect Dialect
	// Record is the dead-letter record itself.
	Record Record

	OriginalTopic     string
	OriginalPartition int32
	OriginalOffset    int64
	OriginalTimestamp time.Time
	// OriginalTimestampType is the original record's timestamp type,
	// when the dialect says it: "CreateTime" or "LogAppendTime" (Spring).
	OriginalTimestampType string

	// Stage is where the record failed: Antidote's stage
	// (deserialize-key, deserialize-value, process); Connect's stage
	// (KEY_CONVERTER, VALUE_CONVERTER, TRANSFORMATION, TASK_PUT, ...);
	// for Spring, deserialize-key when the key exception headers are
	// present, deserialize-value for a DeserializationException, process
	// for a ListenerExecutionFailedException.
	Stage string
	// Class is Antidote's failure class (permanent, transient,
	// unclassified).
	Class string
	// Reason is Antidote's reason (permanent, retries-exhausted,
	// retry-disabled), or a share group's (client-rejected,
	// delivery-count-exceeded).
	Reason string
	// ErrorType is the error's type: a Go type for Antidote, an exception
	// class for the others.
	ErrorType string
	// CauseType is the class of the exception's cause (Spring only).
	CauseType  string
	Message    string
	StackTrace string
	// Attempts is how many times the record was tried: Antidote's
	// attempts, a share group's delivery count.
	Attempts int
	// Group is the consumer group or share group that gave up.
	Group     string
	ClientID  string
	Connector string // Kafka Connect connector name
	Task      int    // Kafka Connect task id
	Executor  string // Kafka Connect: the class that failed (class.name)

	FirstFailure time.Time // Antidote only
	LastFailure  time.Time // Antidote only

	// OriginalHeaders are the original record's headers, in order: for
	// Antidote the leading antidote.original.headers headers, for the
	// other dialects every header but the dialect's own. Nil when they
	// cannot be told (malformed Antidote headers).
	OriginalHeaders []Header
	// Redrives is how many times the original record was redriven: the
	// value of [HeaderRedriveCount] among the original headers.
	Redrives int
	// Metadata are headers that are neither failure headers nor the
	// original record's: Spring's deserializer-exception and
	// dead-letter type headers (see [SpringValueDeserializerException]).
	// A redrive leaves them out.
	Metadata []Header
	// RedrivenFrom is the value of [HeaderRedriveFrom] among the original
	// headers (the dead letter the record was last redriven from), or "".
	RedrivenFrom string
}

// Parse reads the dead letter r. The dialect is that of the last failure
// header of any known dialect, so that a dead letter of a dead letter is
// read as the outermost one.
//
// Parse always returns a non-nil Letter holding what could be decoded.
// The error is [ErrUnknownDialect] for a record with no known failure
// headers, and otherwise joins one [*HeaderError] (or [ErrMissingHeader])
// per malformed header. It never panics. The Letter shares r's byte
// slices, and its strings are views of r's header values: r must not be
// modified while the Letter is in use. It copies no header value, so what
// it allocates is bounded by the number of headers, whatever their size.
func Parse(r Record) (*Letter, error) {
	l := &Letter{Record: r, OriginalPartition: -1, OriginalOffset: -1, Task: -1}
	for i := len(r.Headers) - 1; i >= 0 && l.Dialect == DialectUnknown; i-- {
		l.Dialect = dialectOf(r.Headers[i].Key)
	}
	var errs []error
	switch l.Dialect {
	case DialectUnknown:
		l.OriginalHeaders = r.Headers
		return l, ErrUnknownDialect
	case DialectAntidote:
		errs = parseAntidote(l)
	case DialectSpring:
		errs = parseSpring(l)
	case DialectConnect:
		errs = parseConnect(l)
	case DialectStreams:
		errs = parseStreams(l)
	case DialectShareGroup:
		errs = parseShareGroup(l)
	}
	if l.OriginalHeaders != nil {
		if n, ok, err := redriveCount(l.OriginalHeaders); err != nil {
			errs = append(errs, err)
		} else if ok {
			l.Redrives = n
		}
		for _, h := range l.OriginalHeaders {
			if h.Key == HeaderRedriveFrom {
				l.RedrivenFrom = Truncate(string(h.Value), MaxValueBytes)
			}
		}
	}
	return l, errors.Join(errs...)
}

// ParseRecord is [Parse] of a franz-go record.
func ParseRecord(r *kgo.Record) (*Letter, error) { return Parse(RecordOf(r)) }

// Summary is a one-line description of the failure: the error type (the
// cause's, when known) and the message.
func (l *Letter) Summary() string {
	typ := l.CauseType
	if typ == "" {
		typ = l.ErrorType
	}
	msg := strings.Join(strings.Fields(l.Message), " ")
	switch {
	case typ != "" && msg != "":
		return typ + ": " + msg
	case typ != "":
		return typ
	case msg != "":
		return msg
	}
	return l.Reason
}

// RootCause is the last "Caused by:" line of the letter's stack trace
// (Java's innermost cause: "java.io.CharConversionException: Invalid
// UTF-8 start byte 0xff"), without the prefix; "" when there is none.
func (l *Letter) RootCause() string {
	const cb = "Caused by: "
	i := strings.LastIndex(l.StackTrace, cb)
	if i < 0 {
		return ""
	}
	s := l.StackTrace[i+len(cb):]
	if j := strings.IndexAny(s, "\r\n"); j >= 0 {
		s = s[:j]
	}
	return strings.TrimSpace(s)
}

// headerView indexes the headers of one dialect by name.
type headerView struct {
	first, last map[string][]byte
}

// split returns the headers with prefix (for Antidote: is) as a view, and
// the others in order.
func split(hs []Header, is func(string) bool) (headerView, []Header) {
	v := headerView{first: map[string][]byte{}, last: map[string][]byte{}}
	others := make([]Header, 0, len(hs))
	for _, h := range hs {
		if !is(h.Key) {
			others = append(others, h)
			continue
		}
		if _, ok := v.first[h.Key]; !ok {
			v.first[h.Key] = h.Value
		}
		v.last[h.Key] = h.Value
	}
	return v, others
}

func prefixed(p string) func(string) bool {
	return func(k string) bool { return strings.HasPrefix(k, p) }
}

// decimals parses decimal header values into their destinations and
// collects errors. A missing header leaves its destination alone.
type decoder struct {
	values map[string][]byte
	errs   []error
}

func (d *decoder) str(k string) string { return string(d.values[k]) }

func (d *decoder) bad(k string, e error) {
	d.errs = append(d.errs, &HeaderError{Key: k, Value: d.values[k], Err: e})
}

func (d *decoder) int32(k string, dst *int32) {
	if n, ok := d.parseInt(k, 32); ok {
		*dst = int32(n)
	}
}

func (d *decoder) int64(k string, dst *int64) {
	if n, ok := d.parseInt(k, 64); ok {
		*dst = n
	}
}

func (d *decoder) int(k string, dst *int) {
	if n, ok := d.parseInt(k, 32); ok {
		if n < 0 {
			d.bad(k, errors.New("out of range"))
			return
		}
		*dst = int(n)
	}
}

// parseInt reads header k as a decimal number of the given bit size. An
// absent or null header is no number and no error; a malformed one is
// recorded as a HeaderError.
func (d *decoder) parseInt(k string, bits int) (int64, bool) {
	v, ok := d.values[k]
	if !ok || v == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, bits)
	if err != nil {
		d.bad(k, numErr(err))
		return 0, false
	}
	return n, true
}

// numErr strips strconv's echo of the input, which HeaderError already
// shows.
func numErr(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		if errors.Is(ne.Err, strconv.ErrRange) {
			return errors.New("out of range")
		}
		return errors.New("not a decimal number")
	}
	return err
}

// beInt decodes a big-endian integer of exactly size bytes (Java's
// ByteBuffer.putInt and putLong).
func (d *decoder) beInt(k string, size int) (int64, bool) {
	v, ok := d.values[k]
	if !ok {
		return 0, false
	}
	if len(v) != size {
		what := "a 4-byte big-endian int"
		if size == 8 {
			what = "an 8-byte big-endian long"
		}
		d.bad(k, fmt.Errorf("want %s, got %d bytes", what, len(v)))
		return 0, false
	}
	if size == 4 {
		return int64(int32(binary.BigEndian.Uint32(v))), true
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

func parseAntidote(l *Letter) []error {
	hs := l.Record.Headers
	f, err := parseHeaders(hs, viewString)
	if err == nil {
		l.OriginalTopic, l.OriginalPartition, l.OriginalOffset = f.Topic, f.Partition, f.Offset
		l.OriginalTimestamp = f.Timestamp
		l.Stage, l.Class, l.Reason = string(f.Stage), f.Class, string(f.Reason)
		l.ErrorType, l.Message = f.ErrorType, f.Message
		l.Attempts, l.Group, l.ClientID = f.Attempts, f.Group, f.ClientID
		l.FirstFailure, l.LastFailure = f.First, f.Last
		l.OriginalHeaders = hs[:f.OriginalHeaders:f.OriginalHeaders]
		return nil
	}
	// Malformed: keep what reads, so that the record can still be shown.
	v, _ := split(hs, func(k string) bool { return antidoteFailureHeaders[k] })
	d := &decoder{values: v.last}
	l.OriginalTopic = d.str(HeaderOriginalTopic)
	l.Stage, l.Class, l.Reason = d.str(HeaderStage), d.str(HeaderClass), d.str(HeaderReason)
	l.ErrorType, l.Message = d.str(HeaderErrorType), d.str(HeaderErrorMessage)
	l.Group, l.ClientID = d.str(HeaderGroup), d.str(HeaderClientID)
	quiet := &decoder{values: v.last}
	quiet.int32(HeaderOriginalPartition, &l.OriginalPartition)
	quiet.int64(HeaderOriginalOffset, &l.OriginalOffset)
	quiet.int(HeaderAttempts, &l.Attempts)
	n := -1
	quiet.int(HeaderOriginalHeaders, &n)
	if n >= 0 && n <= len(hs) {
		// The count reads: the original headers are known even though
		// another failure header is malformed.
		l.OriginalHeaders = hs[:n:n]
	}
	return []error{err}
}

func parseSpring(l *Letter) []error {
	v, others := split(l.Record.Headers, prefixed(SpringPrefix))
	l.OriginalHeaders, l.Metadata = springMetadata(l.Record.Headers, others)
	// Spring appends the original-* headers again on every hop when
	// appendOriginalHeaders is set: the first are the record's source.
	// The exception headers of a previous hop are stripped by default,
	// and the newest are last.
	first := &decoder{values: v.first}
	last := &decoder{values: v.last}
	l.OriginalTopic = first.str(SpringOriginalTopic)
	if p, ok := first.beInt(SpringOriginalPartition, 4); ok {
		l.OriginalPartition = int32(p)
	}
	if o, ok := first.beInt(SpringOriginalOffset, 8); ok {
		l.OriginalOffset = o
	}
	if ms, ok := first.beInt(SpringOriginalTimestamp, 8); ok && ms >= 0 {
		l.OriginalTimestamp = time.UnixMilli(ms).UTC()
	}
	l.Group = first.str(SpringOriginalGroup)
	if tt, ok := v.first[SpringOriginalTimestampType]; ok {
		switch s := string(tt); s {
		case TimestampCreateTime, TimestampLogAppendTime, TimestampNone:
			l.OriginalTimestampType = s
		default:
			first.bad(SpringOriginalTimestampType, errors.New("want CreateTime, LogAppendTime or NoTimestampType"))
		}
	}
	if _, ok := v.last[SpringKeyExceptionFQCN]; ok {
		l.Stage = string(StageDeserializeKey)
		l.ErrorType = last.str(SpringKeyExceptionFQCN)
		l.Message = last.str(SpringKeyExceptionMessage)
		l.StackTrace = last.str(SpringKeyExceptionStack)
	} else {
		l.ErrorType = last.str(SpringExceptionFQCN)
		l.Message = last.str(SpringExceptionMessage)
		l.StackTrace = last.str(SpringExceptionStacktrace)
	}
	l.CauseType = last.str(SpringExceptionCauseFQCN)
	if l.Stage == "" {
		switch {
		case strings.HasSuffix(l.ErrorType, "DeserializationException"), strings.HasSuffix(l.CauseType, "DeserializationException"):
			l.Stage = string(StageDeserializeValue)
		case strings.HasSuffix(l.ErrorType, ".ListenerExecutionFailedException"):
			l.Stage = string(StageProcess)
		}
	}
	return append(first.errs, last.errs...)
}

// springMetadata splits Spring's metadata headers off others (the
// headers without the kafka_dlt- prefix, in order): the
// deserializer-exception headers wherever they are, the type headers
// after the first kafka_dlt- header.
func springMetadata(all, others []Header) (orig, meta []Header) {
	firstDLT := len(all)
	for i, h := range all {
		if strings.HasPrefix(h.Key, SpringPrefix) {
			firstDLT = i
			break
		}
	}
	// others is all without the kafka_dlt- headers: its first firstDLT
	// headers come before the first of them.
	orig = others[:0:0]
	for i, h := range others {
		switch {
		case h.Key == SpringValueDeserializerException || h.Key == SpringKeyDeserializerException,
			springTypeHeaders[h.Key] && i >= firstDLT:
			meta = append(meta, h)
		default:
			orig = append(orig, h)
		}
	}
	return orig, meta
}

// decodeOrigin is the part the dialects that write decimal strings share:
// it splits off the headers with prefix (the others are the original
// headers) and reads the original topic, partition and offset. With first,
// the first occurrence of a header counts, otherwise the last. Without a
// topic, the partition and offset are unknown (-1).
func decodeOrigin(l *Letter, prefix string, first bool, topic, partition, offset string) *decoder {
	v, others := split(l.Record.Headers, prefixed(prefix))
	l.OriginalHeaders = others
	d := &decoder{values: v.last}
	if first {
		d.values = v.first
	}
	l.OriginalTopic = d.str(topic)
	d.int32(partition, &l.OriginalPartition)
	d.int64(offset, &l.OriginalOffset)
	if l.OriginalTopic == "" {
		l.OriginalPartition, l.OriginalOffset = -1, -1
	}
	return d
}

func parseConnect(l *Letter) []error {
	// Connect adds a context header only when the record has none of that
	// name yet: the first is the one that counts.
	d := decodeOrigin(l, ConnectPrefix, true, ConnectTopic, ConnectPartition, ConnectOffset)
	l.OriginalTimestamp = l.Record.Timestamp // Connect keeps the source timestamp
	l.Connector = d.str(ConnectConnector)
	var task int32 = -1
	d.int32(ConnectTask, &task)
	l.Task = int(task)
	l.Stage = d.str(ConnectStage)
	l.Executor = d.str(ConnectClass)
	l.ErrorType = d.str(ConnectException)
	l.Message = d.str(ConnectExceptionMessage)
	l.StackTrace = d.str(ConnectExceptionStack)
	return d.errs
}

func parseStreams(l *Letter) []error {
	d := decodeOrigin(l, StreamsPrefix, false, StreamsTopic, StreamsPartition, StreamsOffset)
	l.OriginalTimestamp = l.Record.Timestamp // the failed record's timestamp
	l.ErrorType = d.str(StreamsException)
	l.Message = d.str(StreamsMessage)
	l.StackTrace = d.str(StreamsStacktrace)
	return d.errs
}

func parseShareGroup(l *Letter) []error {
	d := decodeOrigin(l, SharePrefix, false, ShareTopic, SharePartition, ShareOffset)
	l.Group = d.str(ShareGroup)
	d.int(ShareDeliveryCount, &l.Attempts)
	l.Message = d.str(ShareMessage)
	switch l.Message {
	case ShareMessageRejected:
		l.Reason = ShareReasonRejected
	case ShareMessageExceeded:
		l.Reason = ShareReasonExceeded
	}
	return d.errs
}

// redriveCount returns the last redrive count among hs.
func redriveCount(hs []Header) (n int, ok bool, err error) {
	var v []byte
	for _, h := range hs {
		if h.Key == HeaderRedriveCount {
			v, ok = h.Value, true
		}
	}
	if !ok {
		return 0, false, nil
	}
	d := &decoder{values: map[string][]byte{HeaderRedriveCount: v}}
	if v == nil {
		d.bad(HeaderRedriveCount, errors.New("null"))
	}
	d.int(HeaderRedriveCount, &n)
	if len(d.errs) > 0 {
		return 0, false, d.errs[0]
	}
	return n, true, nil
}

// HeaderKind says what one header of a dead letter is.
type HeaderKind string

// Header kinds.
const (
	// KindOriginal: a header of the original record, which a redrive
	// copies back.
	KindOriginal HeaderKind = "original"
	// KindFailure: a failure header of the letter's dialect.
	KindFailure HeaderKind = "failure"
	// KindMetadata: neither (see [Letter.Metadata]); never redriven.
	KindMetadata HeaderKind = "metadata"
)

// HeaderKinds returns the kind of each header of l.Record, in order.
func (l *Letter) HeaderKinds() []HeaderKind {
	hs := l.Record.Headers
	ks := make([]HeaderKind, len(hs))
	prefix := map[Dialect]string{
		DialectSpring: SpringPrefix, DialectConnect: ConnectPrefix, DialectStreams: StreamsPrefix, DialectShareGroup: SharePrefix,
	}[l.Dialect]
	firstDLT := len(hs)
	for i, h := range hs {
		if l.Dialect == DialectSpring && strings.HasPrefix(h.Key, SpringPrefix) {
			firstDLT = i
			break
		}
	}
	for i, h := range hs {
		switch {
		case l.Dialect == DialectUnknown:
			ks[i] = KindOriginal
		case l.Dialect == DialectAntidote:
			ks[i] = KindFailure
			if l.OriginalHeaders != nil && i < len(l.OriginalHeaders) {
				ks[i] = KindOriginal
			}
		case strings.HasPrefix(h.Key, prefix):
			ks[i] = KindFailure
		case l.Dialect == DialectSpring && (h.Key == SpringValueDeserializerException || h.Key == SpringKeyDeserializerException ||
			springTypeHeaders[h.Key] && i > firstDLT):
			ks[i] = KindMetadata
		default:
			ks[i] = KindOriginal
		}
	}
	return ks
}
