package deadletter

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Header names. See the package documentation for their values.
const (
	HeaderStage             = "antidote.stage"
	HeaderReason            = "antidote.reason"
	HeaderClass             = "antidote.class"
	HeaderErrorType         = "antidote.error.type"
	HeaderErrorStage        = "antidote.error.stage"
	HeaderErrorMessage      = "antidote.error.message"
	HeaderOriginalTopic     = "antidote.original.topic"
	HeaderOriginalPartition = "antidote.original.partition"
	HeaderOriginalOffset    = "antidote.original.offset"
	HeaderOriginalTimestamp = "antidote.original.timestamp"
	HeaderOriginalHeaders   = "antidote.original.headers"
	HeaderGroup             = "antidote.consumer.group"
	HeaderClientID          = "antidote.client.id"
	HeaderAttempts          = "antidote.attempts"
	HeaderFirstFailure      = "antidote.failure.first"
	HeaderLastFailure       = "antidote.failure.last"
)

// Size bounds of failure header values, in bytes.
const (
	MaxMessageBytes = 1024
	MaxValueBytes   = 256
)

// TimeLayout is the layout of every time header: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Stage is where a record failed.
type Stage string

// Stages.
const (
	StageDeserializeKey   Stage = "deserialize-key"
	StageDeserializeValue Stage = "deserialize-value"
	StageProcess          Stage = "process"
)

// Reason says why a record was dead-lettered.
type Reason string

// Reasons.
const (
	// ReasonPermanent: the failure will not succeed if retried.
	ReasonPermanent Reason = "permanent"
	// ReasonExhausted: the failure was retried until the retry policy gave up.
	ReasonExhausted Reason = "retries-exhausted"
	// ReasonRetryDisabled: the failure could have been retried, but retrying
	// was turned off by the kill switch.
	ReasonRetryDisabled Reason = "retry-disabled"
	// ReasonOperator: an operator sent the record a partition was stuck on
	// to the dead-letter topic (the message names who asked).
	ReasonOperator Reason = "operator"
	// ReasonRescue: an operator took the record a consumer group was stuck
	// on (any group, not only Antidote's) out of its way with `antidote
	// group rescue`, which committed the offset after it (the message
	// names who asked).
	ReasonRescue Reason = "operator-rescue"
)

// Header is one record header. Its layout matches franz-go's kgo.RecordHeader.
type Header struct {
	Key   string
	Value []byte
}

// Failure is everything the failure headers say about one dead letter.
type Failure struct {
	Stage      Stage
	Reason     Reason
	Class      string // failure.Class as text
	ErrorType  string
	ErrorStage string // serde stage, may be empty
	Message    string

	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time

	// OriginalHeaders is the number of leading headers that are the
	// original record's.
	OriginalHeaders int

	Group    string
	ClientID string
	Attempts int
	First    time.Time
	Last     time.Time
}

// AppendHeaders appends f's failure headers to hs and returns the result.
//
// The values of the text headers are f's strings (truncated when over the
// size bounds) and share their memory; the numbers and times are written
// into one buffer. So the headers of one letter cost at most two
// allocations (that buffer, and hs if it must grow), and nothing is copied
// that several letters share (the stage, the topic, the group). The values
// must not be modified.
func (f *Failure) AppendHeaders(hs []Header) []Header {
	// 3 timestamps of len(TimeLayout)+3 at most (a UTC "Z" is shorter than
	// an offset), 4 numbers of 20 digits at most.
	buf := make([]byte, 0, 3*(len(TimeLayout)+3)+4*20)
	add := func(k string, v []byte) {
		// The value is the part of buf written since v's start; cap it so
		// that nobody can append into the next value.
		hs = append(hs, Header{Key: k, Value: v[:len(v):len(v)]})
	}
	str := func(k, v string) {
		hs = append(hs, Header{Key: k, Value: bytesOf(v)})
	}
	num := func(k string, v int64) {
		start := len(buf)
		buf = strconv.AppendInt(buf, v, 10)
		add(k, buf[start:])
	}
	tm := func(k string, t time.Time) {
		start := len(buf)
		buf = appendTime(buf, t)
		add(k, buf[start:])
	}
	str(HeaderStage, string(f.Stage))
	str(HeaderReason, string(f.Reason))
	str(HeaderClass, f.Class)
	str(HeaderErrorType, Truncate(f.ErrorType, MaxValueBytes))
	if errStage := Truncate(f.ErrorStage, MaxValueBytes); errStage != "" {
		str(HeaderErrorStage, errStage)
	}
	str(HeaderErrorMessage, Truncate(f.Message, MaxMessageBytes))
	str(HeaderOriginalTopic, f.Topic)
	num(HeaderOriginalPartition, int64(f.Partition))
	num(HeaderOriginalOffset, f.Offset)
	tm(HeaderOriginalTimestamp, f.Timestamp)
	num(HeaderOriginalHeaders, int64(f.OriginalHeaders))
	if group := Truncate(f.Group, MaxValueBytes); group != "" {
		str(HeaderGroup, group)
	}
	if client := Truncate(f.ClientID, MaxValueBytes); client != "" {
		str(HeaderClientID, client)
	}
	num(HeaderAttempts, int64(f.Attempts))
	tm(HeaderFirstFailure, f.First)
	tm(HeaderLastFailure, f.Last)
	return hs
}

// bytesOf returns the bytes of s, without a copy: they must not be modified.
// An empty string has the empty, non-nil value (a header value, unlike a
// null one).
func bytesOf(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// appendTime appends t in TimeLayout, in UTC, as t.UTC().AppendFormat does
// but without parsing the layout: a letter has three timestamps.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	a := [len("2006-01-02T15:04:05.000Z")]byte{4: '-', 7: '-', 10: 'T', 13: ':', 16: ':', 19: '.', 23: 'Z'}
	two := func(i, v int) { a[i], a[i+1] = byte('0'+v/10), byte('0'+v%10) }
	two(0, year/100)
	two(2, year%100)
	two(5, int(month))
	two(8, day)
	two(11, hour)
	two(14, minute)
	two(17, sec)
	a[20] = byte('0' + ms/100)
	two(21, ms%100)
	return append(b, a[:]...)
}

// ErrMissingHeader is returned by [ParseHeaders] when a record lacks a
// required failure header; it is not an Antidote dead letter.
var ErrMissingHeader = errors.New("deadletter: missing header")

// ParseHeaders reads Antidote failure headers from hs. When a name occurs more
// than once, the last occurrence wins (a record dead-lettered twice keeps both
// sets; the newest is last). It never panics on malformed input: bad values
// give an error that names the header.
func ParseHeaders(hs []Header) (*Failure, error) { return parseHeaders(hs, copyString) }

// copyString and viewString turn header bytes into strings: a copy, or a
// view of the same memory (for a [Letter], which shares its record's
// bytes anyway).
func copyString(b []byte) string { return string(b) }

func viewString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func parseHeaders(hs []Header, str func([]byte) string) (*Failure, error) {
	// One pass, no map: this runs once per letter of a scan.
	var v [numHeaders][]byte
	var seen uint32
	for _, h := range hs {
		if i := headerIndex(h.Key); i >= 0 {
			v[i] = h.Value
			seen |= 1 << i
		}
	}
	has := func(i int) bool { return seen&(1<<i) != 0 }
	for _, i := range []int{hiStage, hiTopic, hiPartition, hiOffset} {
		if !has(i) {
			return nil, fmt.Errorf("%w %s", ErrMissingHeader, headerNames[i])
		}
	}
	f := &Failure{
		Stage: Stage(str(v[hiStage])), Topic: str(v[hiTopic]), Reason: Reason(str(v[hiReason])),
		Class: str(v[hiClass]), ErrorType: str(v[hiErrorType]), ErrorStage: str(v[hiErrorStage]),
		Message: str(v[hiMessage]), Group: str(v[hiGroup]), ClientID: str(v[hiClientID]),
	}
	bad := func(i int, e error) error {
		return fmt.Errorf("deadletter: header %s: bad value %q: %w", headerNames[i], Truncate(string(v[i]), 64), e)
	}
	pi, e := strconv.ParseInt(viewString(v[hiPartition]), 10, 32)
	if e != nil {
		return nil, bad(hiPartition, e)
	}
	f.Partition = int32(pi)
	if f.Offset, e = strconv.ParseInt(viewString(v[hiOffset]), 10, 64); e != nil {
		return nil, bad(hiOffset, e)
	}
	intHeader := func(i int, dst *int) error {
		if has(i) {
			n, e := strconv.Atoi(viewString(v[i]))
			if e != nil || n < 0 {
				if e == nil {
					e = errors.New("negative")
				}
				return bad(i, e)
			}
			*dst = n
		}
		return nil
	}
	if e := intHeader(hiAttempts, &f.Attempts); e != nil {
		return nil, e
	}
	if e := intHeader(hiOriginalHeaders, &f.OriginalHeaders); e != nil {
		return nil, e
	}
	if f.OriginalHeaders > len(hs) {
		return nil, bad(hiOriginalHeaders, errors.New("more than the record has"))
	}
	for _, th := range []struct {
		i   int
		dst *time.Time
	}{{hiTimestamp, &f.Timestamp}, {hiFirst, &f.First}, {hiLast, &f.Last}} {
		if has(th.i) {
			t, e := time.Parse(time.RFC3339Nano, viewString(v[th.i]))
			if e != nil {
				return nil, bad(th.i, e)
			}
			*th.dst = t
		}
	}
	return f, nil
}

// Indexes of the failure headers in ParseHeaders.
const (
	hiStage = iota
	hiReason
	hiClass
	hiErrorType
	hiErrorStage
	hiMessage
	hiTopic
	hiPartition
	hiOffset
	hiTimestamp
	hiOriginalHeaders
	hiGroup
	hiClientID
	hiAttempts
	hiFirst
	hiLast
	numHeaders
)

var headerNames = [numHeaders]string{
	HeaderStage, HeaderReason, HeaderClass, HeaderErrorType, HeaderErrorStage, HeaderErrorMessage,
	HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset, HeaderOriginalTimestamp,
	HeaderOriginalHeaders, HeaderGroup, HeaderClientID, HeaderAttempts, HeaderFirstFailure, HeaderLastFailure,
}

// headerIndex returns the index of a failure header name, or -1.
func headerIndex(k string) int {
	if len(k) < len("antidote.stage") || k[:9] != "antidote." {
		return -1
	}
	for i, n := range headerNames {
		if n == k {
			return i
		}
	}
	return -1
}

// Truncate cuts s to at most n bytes without splitting a UTF-8 sequence, and
// marks a cut with a trailing "…". Invalid UTF-8 is replaced, so the result is
// always valid UTF-8.
func Truncate(s string, n int) string {
	if !utf8.ValidString(s) { // ValidString is the faster check
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := max(n-len(ell), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// ErrorType returns the Go type name of the root cause of err: the last error
// reached by following Unwrap (the first branch of a joined error), e.g.
// "*json.SyntaxError". Wrappers such as fmt.Errorf's, failure marks and
// serde's stage errors are seen through.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[0]
			}
		}
		if next == nil {
			return reflect.TypeOf(err).String()
		}
		err = next
	}
}
