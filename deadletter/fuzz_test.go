package deadletter_test

import (
	"strings"
	"testing"

	"github.com/antidote-kafka/antidote/deadletter"
)

// Every parser must hold for any header values: no panic, a non-nil
// Letter, original headers that are a prefix (Antidote) or a subset of
// the record's.

func checkLetter(t *testing.T, r deadletter.Record) *deadletter.Letter {
	t.Helper()
	l, err := deadletter.Parse(r)
	if l == nil {
		t.Fatalf("Parse returned a nil Letter (err %v)", err)
	}
	if len(l.OriginalHeaders) > len(r.Headers) {
		t.Fatalf("%d original headers of %d", len(l.OriginalHeaders), len(r.Headers))
	}
	_ = l.Summary()
	_ = deadletter.Filter{Reason: "x", Stage: "y"}.Match(l)
	if kinds := l.HeaderKinds(); len(kinds) != len(r.Headers) {
		t.Fatalf("%d header kinds for %d headers", len(kinds), len(r.Headers))
	}
	if len(l.OriginalHeaders)+len(l.Metadata) > len(r.Headers) {
		t.Fatalf("%d original and %d metadata headers of %d", len(l.OriginalHeaders), len(l.Metadata), len(r.Headers))
	}
	if rc := l.RootCause(); strings.ContainsAny(rc, "\r\n") {
		t.Fatalf("root cause spans lines: %q", rc)
	}
	return l
}

var huge = strings.Repeat("ü", 1<<16)

func FuzzParseSpring(f *testing.F) {
	f.Add("orders", []byte{0, 0, 0, 3}, []byte{0, 0, 0, 0, 0, 0, 0, 7}, []byte{0, 0, 1, 0x8e, 0, 0, 0, 0}, "java.lang.X", false)
	f.Add("", []byte{}, []byte{}, []byte{}, "", true)
	f.Add("o", []byte{0, 0, 1}, make([]byte, 9), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, huge, false)
	f.Add(huge, []byte{0x80, 0, 0, 0}, []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "\xff\xfe", true)
	f.Fuzz(func(t *testing.T, topic string, partition, offset, ts []byte, fqcn string, key bool) {
		hs := hs{
			h(deadletter.SpringOriginalTopic, topic),
			{Key: deadletter.SpringOriginalPartition, Value: partition},
			{Key: deadletter.SpringOriginalOffset, Value: offset},
			{Key: deadletter.SpringOriginalTimestamp, Value: ts},
		}
		if key {
			hs = append(hs, h(deadletter.SpringKeyExceptionFQCN, fqcn))
		} else {
			hs = append(hs, h(deadletter.SpringExceptionFQCN, fqcn), h(deadletter.SpringExceptionCauseFQCN, fqcn))
		}
		l := checkLetter(t, rec(hs))
		if l.Dialect != deadletter.DialectSpring {
			t.Fatalf("dialect %s", l.Dialect)
		}
		if len(partition) == 4 && l.OriginalPartition == -1 && partition[0] != 0xff {
			t.Fatalf("4-byte partition %x not decoded", partition)
		}
	})
}

func decimalFuzz(f *testing.F, dialect deadletter.Dialect, topicKey, partitionKey, offsetKey, extraKey string) {
	f.Add("orders", "3", "8412", "2")
	f.Add("", "", "", "")
	f.Add("o", "-1", "-1", "-1")
	f.Add("o", "2147483648", "9223372036854775808", "1e3")
	f.Add(huge, " 7 ", "0x10", "\x00")
	f.Add("o", "٣", "+5", "99999999999999999999")
	f.Fuzz(func(t *testing.T, topic, partition, offset, extra string) {
		l := checkLetter(t, rec(hs{h(topicKey, topic), h(partitionKey, partition), h(offsetKey, offset), h(extraKey, extra)}))
		if l.Dialect != dialect {
			t.Fatalf("dialect %s, want %s", l.Dialect, dialect)
		}
	})
}

func FuzzParseConnect(f *testing.F) {
	decimalFuzz(f, deadletter.DialectConnect, deadletter.ConnectTopic, deadletter.ConnectPartition, deadletter.ConnectOffset, deadletter.ConnectTask)
}

func FuzzParseStreams(f *testing.F) {
	decimalFuzz(f, deadletter.DialectStreams, deadletter.StreamsTopic, deadletter.StreamsPartition, deadletter.StreamsOffset, deadletter.StreamsMessage)
}

func FuzzParseShareGroup(f *testing.F) {
	decimalFuzz(f, deadletter.DialectShareGroup, deadletter.ShareTopic, deadletter.SharePartition, deadletter.ShareOffset, deadletter.ShareDeliveryCount)
}

func FuzzParseAntidote(f *testing.F) {
	f.Add("3", "8412", "2", "1", "2026-03-14T15:09:26.535Z", 3)
	f.Add("", "", "", "", "", 0)
	f.Add("x", "-1", "99", "-4", "yesterday", 1)
	f.Add("2147483648", "9223372036854775808", "-1", "4294967296", huge, 40)
	f.Fuzz(func(t *testing.T, partition, offset, nOrig, redrives, ts string, lead int) {
		lead = min(max(lead, 0), 64)
		var hs hs
		for i := 0; i < lead; i++ {
			hs = append(hs, h("h", strings.Repeat("v", i)))
		}
		hs = append(hs, h(deadletter.HeaderRedriveCount, redrives))
		hs = append(hs,
			h(deadletter.HeaderStage, "process"), h(deadletter.HeaderOriginalTopic, "orders"),
			h(deadletter.HeaderOriginalPartition, partition), h(deadletter.HeaderOriginalOffset, offset),
			h(deadletter.HeaderOriginalHeaders, nOrig), h(deadletter.HeaderOriginalTimestamp, ts),
		)
		l := checkLetter(t, rec(hs))
		if l.Dialect != deadletter.DialectAntidote {
			t.Fatalf("dialect %s", l.Dialect)
		}
	})
}

// FuzzParse feeds arbitrary header lists: names are drawn from every
// dialect, values are raw bytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{})
	f.Add([]byte("\x03\x00\x00\x01\x0a\x04\x00\x00\x00\x00\x00\x00\x00\x01"))
	// A Spring letter with a stack trace, a timestamp type and metadata.
	f.Add([]byte("\x1c\x02[B\x08\x03ord\x19\x0aCreateTime\x1a\x1dx\nCaused by: a.B: c\r\nCaused by: \x1b\x01\xac"))
	names := []string{
		deadletter.HeaderStage, deadletter.HeaderOriginalTopic, deadletter.HeaderOriginalPartition,
		deadletter.HeaderOriginalOffset, deadletter.HeaderOriginalHeaders, deadletter.HeaderAttempts,
		deadletter.HeaderOriginalTimestamp, deadletter.HeaderRedriveCount,
		deadletter.SpringOriginalTopic, deadletter.SpringOriginalPartition, deadletter.SpringOriginalOffset,
		deadletter.SpringOriginalTimestamp, deadletter.SpringKeyExceptionFQCN,
		deadletter.SpringOriginalTimestampType, deadletter.SpringExceptionStacktrace,
		deadletter.SpringValueDeserializerException, "__TypeId__",
		deadletter.ConnectTopic, deadletter.ConnectPartition, deadletter.ConnectOffset, deadletter.ConnectTask,
		deadletter.StreamsTopic, deadletter.StreamsPartition, deadletter.StreamsOffset,
		deadletter.ShareTopic, deadletter.SharePartition, deadletter.ShareOffset, deadletter.ShareDeliveryCount,
		"other",
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Each header: a name byte, a length byte, then that many bytes.
		var hs hs
		for len(data) >= 2 {
			name := names[int(data[0])%len(names)]
			n := min(int(data[1]), len(data)-2)
			var v []byte
			if data[1] != 0xff {
				v = data[2 : 2+n]
			}
			hs = append(hs, deadletter.Header{Key: name, Value: v})
			data = data[2+n:]
		}
		checkLetter(t, rec(hs))
	})
}
