package deadletter_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

var origHeaders = hs{h("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), {Key: "bin", Value: []byte{0, 1, 2, 0xff}}, {Key: "nil", Value: nil}}

func rec(headers hs) deadletter.Record {
	return deadletter.Record{
		Topic: "dlq", Partition: 1, Offset: 42, Timestamp: ts0.Add(time.Minute),
		Key: []byte("k"), Value: []byte(`{"x":`), Headers: headers,
	}
}

func TestParseDialects(t *testing.T) {
	tests := []struct {
		name    string
		headers hs
		want    deadletter.Letter // Record is filled in by the test
	}{
		{"antidote", antidoteLetter(origHeaders, "orders", 3, 8412), deadletter.Letter{
			Dialect: deadletter.DialectAntidote, OriginalTopic: "orders", OriginalPartition: 3, OriginalOffset: 8412,
			OriginalTimestamp: ts0, Stage: "deserialize-value", Class: "permanent", Reason: "permanent",
			ErrorType: "*json.SyntaxError", Message: "invalid character 'x' looking for beginning of value",
			Attempts: 1, Group: "orders-service", ClientID: "antidote", Task: -1,
			FirstFailure: ts0.Add(time.Second), LastFailure: ts0.Add(time.Second), OriginalHeaders: origHeaders,
		}},
		{"spring", springLetter(origHeaders, "orders", 3, 8412), deadletter.Letter{
			Dialect: deadletter.DialectSpring, OriginalTopic: "orders", OriginalPartition: 3, OriginalOffset: 8412,
			OriginalTimestamp: ts0, OriginalTimestampType: "CreateTime", Stage: "process",
			ErrorType:  "org.springframework.kafka.listener.ListenerExecutionFailedException",
			CauseType:  "java.lang.IllegalStateException",
			Message:    "Listener method 'handle' threw exception; nested exception is java.lang.IllegalStateException: no stock",
			StackTrace: "org.springframework.kafka.listener.ListenerExecutionFailedException: ...\n\tat ...",
			Group:      "orders-service", Task: -1, OriginalHeaders: origHeaders,
		}},
		{"spring key", springKeyLetter("orders", 0, 1<<40), deadletter.Letter{
			Dialect: deadletter.DialectSpring, OriginalTopic: "orders", OriginalPartition: 0, OriginalOffset: 1 << 40,
			OriginalTimestamp: ts0, OriginalTimestampType: "CreateTime", Stage: "deserialize-key",
			ErrorType:  "org.springframework.kafka.support.serializer.DeserializationException",
			Message:    "failed to deserialize; nested exception is java.lang.NumberFormatException",
			StackTrace: "org.springframework...DeserializationException\n\tat ...",
			Task:       -1, OriginalHeaders: hs{},
		}},
		{"connect", connectLetter(origHeaders, "orders", 3, 8412), deadletter.Letter{
			Dialect: deadletter.DialectConnect, OriginalTopic: "orders", OriginalPartition: 3, OriginalOffset: 8412,
			OriginalTimestamp: ts0.Add(time.Minute), Stage: "VALUE_CONVERTER",
			ErrorType:  "org.apache.kafka.connect.errors.DataException",
			Message:    "Converting byte[] to Kafka Connect data failed due to serialization error: ",
			StackTrace: "org.apache.kafka.connect.errors.DataException: ...\n\tat ...",
			Connector:  "jdbc-sink", Task: 2, Executor: "org.apache.kafka.connect.json.JsonConverter",
			OriginalHeaders: origHeaders,
		}},
		{"streams", streamsLetter(origHeaders, "orders", 3, 8412), deadletter.Letter{
			Dialect: deadletter.DialectStreams, OriginalTopic: "orders", OriginalPartition: 3, OriginalOffset: 8412,
			OriginalTimestamp: ts0.Add(time.Minute),
			ErrorType:         "org.apache.kafka.common.errors.SerializationException",
			Message:           "Size of data received by IntegerDeserializer is not 4",
			StackTrace:        "org.apache.kafka.common.errors.SerializationException: ...\n\tat ...",
			Task:              -1, OriginalHeaders: origHeaders,
		}},
		{"share group", shareLetter("orders", 3, 8412), deadletter.Letter{
			Dialect: deadletter.DialectShareGroup, OriginalTopic: "orders", OriginalPartition: 3, OriginalOffset: 8412,
			Reason: "delivery-count-exceeded", Message: deadletter.ShareMessageExceeded, Attempts: 5,
			Group: "billing-share", Task: -1, OriginalHeaders: hs{},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rec(tt.headers)
			got, err := deadletter.Parse(r)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.want.Record = r
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestParseUnknown(t *testing.T) {
	l, err := deadletter.Parse(rec(origHeaders))
	if !errors.Is(err, deadletter.ErrUnknownDialect) || l == nil || l.Dialect != deadletter.DialectUnknown {
		t.Fatalf("Parse = %+v, %v; want an unknown letter and ErrUnknownDialect", l, err)
	}
	if l.Dialect.String() != "unknown" {
		t.Errorf("String = %q", l.Dialect.String())
	}
}

// A dead letter of a dead letter is read as the outermost one.
func TestParseOutermost(t *testing.T) {
	inner := springLetter(origHeaders, "orders", 3, 8412)
	outer := antidoteLetter(inner, "orders.DLT", 0, 7)
	l, err := deadletter.Parse(rec(outer))
	if err != nil {
		t.Fatal(err)
	}
	if l.Dialect != deadletter.DialectAntidote || l.OriginalTopic != "orders.DLT" || !reflect.DeepEqual(l.OriginalHeaders, inner) {
		t.Errorf("got dialect %s, original topic %s, %d original headers", l.Dialect, l.OriginalTopic, len(l.OriginalHeaders))
	}

	inner = antidoteLetter(origHeaders, "orders", 3, 8412)
	outer = streamsLetter(inner, "orders.dlq", 0, 7)
	if l, err = deadletter.Parse(rec(outer)); err != nil {
		t.Fatal(err)
	}
	if l.Dialect != deadletter.DialectStreams || l.OriginalTopic != "orders.dlq" || !reflect.DeepEqual(l.OriginalHeaders, inner) {
		t.Errorf("got dialect %s, original topic %s", l.Dialect, l.OriginalTopic)
	}
}

// Spring appends the original-* headers on every hop
// (appendOriginalHeaders): the first name the record's source.
func TestParseSpringHops(t *testing.T) {
	first := springLetter(nil, "orders", 3, 8412)
	second := springLetter(first, "orders-retry-0", 0, 5)
	l, err := deadletter.Parse(rec(second))
	if err != nil {
		t.Fatal(err)
	}
	if l.OriginalTopic != "orders" || l.OriginalPartition != 3 || l.OriginalOffset != 8412 {
		t.Errorf("coordinates %s[%d]@%d, want orders[3]@8412", l.OriginalTopic, l.OriginalPartition, l.OriginalOffset)
	}
	if len(l.OriginalHeaders) != 0 {
		t.Errorf("original headers %v, want none", l.OriginalHeaders)
	}
}

func TestParseMalformed(t *testing.T) {
	replace := func(in hs, k string, v []byte) hs {
		out := append(hs{}, in...)
		for i := range out {
			if out[i].Key == k {
				out[i].Value = v
			}
		}
		return out
	}
	tests := []struct {
		name    string
		headers hs
		header  string // named by the error
	}{
		{"spring 3-byte partition", replace(springLetter(nil, "o", 1, 2), deadletter.SpringOriginalPartition, []byte{0, 0, 1}), deadletter.SpringOriginalPartition},
		{"spring 9-byte offset", replace(springLetter(nil, "o", 1, 2), deadletter.SpringOriginalOffset, make([]byte, 9)), deadletter.SpringOriginalOffset},
		{"spring decimal partition", replace(springLetter(nil, "o", 1, 2), deadletter.SpringOriginalPartition, []byte("1")), deadletter.SpringOriginalPartition},
		{"spring empty timestamp", replace(springLetter(nil, "o", 1, 2), deadletter.SpringOriginalTimestamp, []byte{}), deadletter.SpringOriginalTimestamp},
		{"connect text partition", replace(connectLetter(nil, "o", 1, 2), deadletter.ConnectPartition, []byte("one")), deadletter.ConnectPartition},
		{"connect huge offset", replace(connectLetter(nil, "o", 1, 2), deadletter.ConnectOffset, []byte("99999999999999999999999")), deadletter.ConnectOffset},
		{"streams partition overflow", replace(streamsLetter(nil, "o", 1, 2), deadletter.StreamsPartition, []byte("2147483648")), deadletter.StreamsPartition},
		{"share delivery count", replace(shareLetter("o", 1, 2), deadletter.ShareDeliveryCount, []byte("-3")), deadletter.ShareDeliveryCount},
		{"antidote partition", replace(antidoteLetter(nil, "o", 1, 2), deadletter.HeaderOriginalPartition, []byte("x")), deadletter.HeaderOriginalPartition},
		{"antidote original headers", replace(antidoteLetter(nil, "o", 1, 2), deadletter.HeaderOriginalHeaders, []byte("99")), deadletter.HeaderOriginalHeaders},
		{"redrive count", append(hs{h(deadletter.HeaderRedriveCount, "many")}, connectLetter(nil, "o", 1, 2)...), deadletter.HeaderRedriveCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := deadletter.Parse(rec(tt.headers))
			if err == nil || !strings.Contains(err.Error(), tt.header) {
				t.Fatalf("err = %v, want one naming %s", err, tt.header)
			}
			if l == nil || l.Dialect == deadletter.DialectUnknown || l.OriginalTopic != "o" {
				t.Fatalf("letter = %+v, want the decodable part", l)
			}
		})
	}
	// Typed: a malformed Spring int is a *HeaderError.
	_, err := deadletter.Parse(rec(tests[0].headers))
	var he *deadletter.HeaderError
	if !errors.As(err, &he) || he.Key != deadletter.SpringOriginalPartition {
		t.Errorf("err = %#v, want a *HeaderError", err)
	}
}

// Values Java writes as null (a Streams exception without a message,
// punctuation without a topic) are absent values, not errors.
func TestParseNullValues(t *testing.T) {
	l, err := deadletter.Parse(rec(hs{
		{Key: deadletter.StreamsException, Value: []byte("java.lang.NullPointerException")},
		{Key: deadletter.StreamsMessage, Value: nil},
		{Key: deadletter.StreamsTopic, Value: nil},
		{Key: deadletter.StreamsPartition, Value: []byte("-1")},
		{Key: deadletter.StreamsOffset, Value: []byte("-1")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if l.OriginalTopic != "" || l.OriginalPartition != -1 || l.OriginalOffset != -1 || l.Message != "" {
		t.Errorf("got %+v", l)
	}
}

func TestFilter(t *testing.T) {
	l, _ := deadletter.Parse(rec(antidoteLetter(nil, "orders", 0, 1)))
	for _, tt := range []struct {
		f    deadletter.Filter
		want bool
	}{
		{deadletter.Filter{}, true},
		{deadletter.Filter{OriginalTopic: "orders"}, true},
		{deadletter.Filter{OriginalTopic: "order"}, false},
		{deadletter.Filter{Stage: "DESERIALIZE-VALUE"}, true},
		{deadletter.Filter{Stage: "process"}, false},
		{deadletter.Filter{Class: "Permanent"}, true},
		{deadletter.Filter{Class: "transient"}, false},
		{deadletter.Filter{Reason: "syntaxerror"}, true},
		{deadletter.Filter{Reason: "invalid character"}, true},
		{deadletter.Filter{Reason: "timeout"}, false},
		{deadletter.Filter{Since: ts0.Add(time.Minute)}, true},
		{deadletter.Filter{Since: ts0.Add(time.Hour)}, false},
		{deadletter.Filter{Until: ts0.Add(time.Minute)}, false},
		{deadletter.Filter{Until: ts0.Add(time.Hour)}, true},
	} {
		if got := tt.f.Match(l); got != tt.want {
			t.Errorf("%+v.Match = %v, want %v", tt.f, got, tt.want)
		}
	}
}

func TestRedriveConfig(t *testing.T) {
	c := deadletter.RedriveConfig{Topic: "orders.dlq"}
	if g := c.DefaultGroup(); g != "antidote-redrive-orders.dlq" {
		t.Errorf("DefaultGroup = %q", g)
	}
	f := c
	f.Filter.Stage = "process"
	if g := f.DefaultGroup(); !strings.HasPrefix(g, "antidote-redrive-orders.dlq-") || g == f.DefaultGroup()+"x" {
		t.Errorf("DefaultGroup with filter = %q", g)
	}
	other := c
	other.Filter.Stage = "deserialize-value"
	if other.DefaultGroup() == f.DefaultGroup() {
		t.Error("different filters share a group")
	}
	// The default limit, said or not, keeps the group; another one has its
	// own, or a purge would take the letters it refused for redriven.
	def, one := c, c
	def.MaxRedrives, one.MaxRedrives = deadletter.DefaultMaxRedrives, 1
	if def.DefaultGroup() != c.DefaultGroup() || one.DefaultGroup() == c.DefaultGroup() {
		t.Errorf("DefaultGroup with MaxRedrives: default %q, 1 %q, unset %q", def.DefaultGroup(), one.DefaultGroup(), c.DefaultGroup())
	}
	for _, bad := range []deadletter.RedriveConfig{{}, {Topic: "a", To: "a"}, {Topic: "a", To: "bad topic"}, {Topic: "a", Rate: -1}, {Topic: "a", Limit: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestFilterRelative(t *testing.T) {
	l, _ := deadletter.Parse(rec(antidoteLetter(nil, "orders", 0, 1)))
	now := l.Record.Timestamp.Add(2 * time.Hour)
	for _, tt := range []struct {
		f    deadletter.Filter
		want bool
	}{
		{deadletter.Filter{MaxAge: 3 * time.Hour}, true},
		{deadletter.Filter{MaxAge: time.Hour}, false},
		{deadletter.Filter{MinAge: time.Hour}, true},
		{deadletter.Filter{MinAge: 3 * time.Hour}, false},
		// The narrower bound wins.
		{deadletter.Filter{MaxAge: 3 * time.Hour, Since: now.Add(-time.Hour)}, false},
	} {
		if got := tt.f.At(now).Match(l); got != tt.want {
			t.Errorf("%+v.At(now).Match = %v, want %v", tt.f, got, tt.want)
		}
	}
	// The canonical text of a relative filter does not depend on when it
	// is taken, and ignores the case of stage and class.
	a := deadletter.Filter{MaxAge: 7 * 24 * time.Hour, Stage: "Process"}
	b := deadletter.Filter{MaxAge: 7 * 24 * time.Hour, Stage: "process"}
	if a.Canonical() != b.Canonical() || !strings.Contains(a.Canonical(), "max-age") {
		t.Errorf("canonical %q vs %q", a.Canonical(), b.Canonical())
	}
	if a.Canonical() == a.At(now).Canonical() {
		t.Errorf("resolved filter has the relative filter's text %q", a.Canonical())
	}
	// Taken at two moments (the bubble's clock moves by the sleep), the
	// default group of a relative filter is the same.
	synctest.Test(t, func(t *testing.T) {
		c := deadletter.RedriveConfig{Topic: "orders.dlq", Filter: a}
		g1 := c.DefaultGroup()
		time.Sleep(2 * time.Millisecond)
		if g2 := c.DefaultGroup(); g1 != g2 || g1 == "antidote-redrive-orders.dlq" {
			t.Errorf("relative filter: groups %q and %q", g1, g2)
		}
	})
}

// Spring 4.1: the retained deserializer exception and the dead-letter
// serializer's __TypeId__ are Spring's metadata, not original headers; an
// original __TypeId__ (before the kafka_dlt- headers) stays original; the
// timestamp type is read; --reason matches the last "Caused by".
func TestParseSpring41Deserialization(t *testing.T) {
	orig := hs{h("__TypeId__", "com.example.Order"), h("traceparent", "00-abc-def-01")}
	l, err := deadletter.Parse(rec(spring41Deserialization(orig, "orders", 2, 77)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.OriginalHeaders, orig) {
		t.Errorf("original headers %v, want %v", l.OriginalHeaders, orig)
	}
	if len(l.Metadata) != 2 || l.Metadata[0].Key != deadletter.SpringValueDeserializerException || l.Metadata[1].Key != "__TypeId__" || string(l.Metadata[1].Value) != "[B" {
		t.Errorf("metadata %v", l.Metadata)
	}
	if l.OriginalTimestampType != deadletter.TimestampLogAppendTime || l.Stage != string(deadletter.StageDeserializeValue) || l.Group != "" {
		t.Errorf("timestamp type %q, stage %q, group %q", l.OriginalTimestampType, l.Stage, l.Group)
	}
	if rc := l.RootCause(); rc != "java.io.CharConversionException: Invalid UTF-8 start byte 0xff (at char #3, byte #-1)" {
		t.Errorf("root cause %q", rc)
	}
	for _, tt := range []struct {
		reason string
		want   bool
	}{{"Invalid UTF-8", true}, {"CharConversionException", true}, {"failed to deserialize", true}, {"no stock", false}} {
		if got := (deadletter.Filter{Reason: tt.reason}).Match(l); got != tt.want {
			t.Errorf("--reason %q: %v, want %v", tt.reason, got, tt.want)
		}
	}
	kinds := l.HeaderKinds()
	want := []deadletter.HeaderKind{"original", "original", "metadata", "failure", "failure", "failure", "failure", "failure", "failure", "failure", "failure", "failure", "metadata"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v\nwant  %v", kinds, want)
	}
	// A bad timestamp type is named.
	bad := spring41Deserialization(nil, "orders", 2, 77)
	for i := range bad {
		if bad[i].Key == deadletter.SpringOriginalTimestampType {
			bad[i].Value = []byte("Tuesday")
		}
	}
	if _, err := deadletter.Parse(rec(bad)); err == nil || !strings.Contains(err.Error(), deadletter.SpringOriginalTimestampType) {
		t.Errorf("bad timestamp type: %v", err)
	}
}
