package dlq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// Dead letters built the way each system writes them (see the sources in
// deadletter/dialect.go).

func hdr(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

func springDLT(orig []kgo.RecordHeader, topic string, partition int32, offset int64) []kgo.RecordHeader {
	return append(append([]kgo.RecordHeader{}, orig...),
		hdr("kafka_dlt-exception-fqcn", "org.springframework.kafka.listener.ListenerExecutionFailedException"),
		hdr("kafka_dlt-exception-cause-fqcn", "java.lang.IllegalStateException"),
		hdr("kafka_dlt-exception-message", "Listener method threw exception; nested exception is java.lang.IllegalStateException: no stock"),
		hdr("kafka_dlt-exception-stacktrace", "org.springframework.kafka.listener.ListenerExecutionFailedException: x\n\tat a.b(C.java:1)\n"),
		hdr("kafka_dlt-original-topic", topic),
		kgo.RecordHeader{Key: "kafka_dlt-original-partition", Value: binary.BigEndian.AppendUint32(nil, uint32(partition))},
		kgo.RecordHeader{Key: "kafka_dlt-original-offset", Value: binary.BigEndian.AppendUint64(nil, uint64(offset))},
		kgo.RecordHeader{Key: "kafka_dlt-original-timestamp", Value: binary.BigEndian.AppendUint64(nil, uint64(time.Now().Add(-time.Hour).UnixMilli()))},
		hdr("kafka_dlt-original-timestamp-type", "CreateTime"),
		hdr("kafka_dlt-original-consumer-group", "orders-service"),
	)
}

func connectDLQ(orig []kgo.RecordHeader, topic string, partition int32, offset int64) []kgo.RecordHeader {
	return append(append([]kgo.RecordHeader{}, orig...),
		hdr("__connect.errors.topic", topic),
		hdr("__connect.errors.partition", strconv.Itoa(int(partition))),
		hdr("__connect.errors.offset", strconv.FormatInt(offset, 10)),
		hdr("__connect.errors.connector.name", "jdbc-sink"),
		hdr("__connect.errors.task.id", "0"),
		hdr("__connect.errors.stage", "VALUE_CONVERTER"),
		hdr("__connect.errors.class.name", "org.apache.kafka.connect.json.JsonConverter"),
		hdr("__connect.errors.exception.class.name", "org.apache.kafka.connect.errors.DataException"),
		hdr("__connect.errors.exception.message", "Converting byte[] to Kafka Connect data failed due to serialization error"),
		hdr("__connect.errors.exception.stacktrace", "org.apache.kafka.connect.errors.DataException: x\n\tat y\n"),
	)
}

func streamsDLQ(orig []kgo.RecordHeader, topic string, partition int32, offset int64) []kgo.RecordHeader {
	return append(append([]kgo.RecordHeader{}, orig...),
		hdr("__streams.errors.exception", "org.apache.kafka.common.errors.SerializationException"),
		hdr("__streams.errors.message", "Size of data received by IntegerDeserializer is not 4"),
		hdr("__streams.errors.stacktrace", "org.apache.kafka.common.errors.SerializationException: x\n\tat y\n"),
		hdr("__streams.errors.topic", topic),
		hdr("__streams.errors.partition", strconv.Itoa(int(partition))),
		hdr("__streams.errors.offset", strconv.FormatInt(offset, 10)),
	)
}

func shareDLQ(topic string, partition int32, offset int64) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		hdr("__dlq.errors.topic", topic),
		hdr("__dlq.errors.partition", strconv.Itoa(int(partition))),
		hdr("__dlq.errors.offset", strconv.FormatInt(offset, 10)),
		hdr("__dlq.errors.group", "billing-share"),
		hdr("__dlq.errors.delivery.count", "5"),
		hdr("__dlq.errors.message", "Offset delivery count exceeded the threshold."),
	}
}

// dlqFixture is a dead-letter topic holding letters of every dialect.
type dlqFixture struct {
	c        *kafkatest.Cluster
	cl       *kgo.Client
	dlq, src string
	// letters by value, in produce order on partition 0.
	values []string
	// orig is the original headers each redrivable letter must come back
	// with.
	orig map[string][]kgo.RecordHeader
}

func (fx *dlqFixture) brokers() string { return strings.Join(fx.c.Brokers(), ",") }

func (fx *dlqFixture) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCmd(t, append(args, "--brokers", fx.brokers(), "--timeout", "20s")...)
}

func newDLQFixture(t *testing.T) *dlqFixture {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	fx := &dlqFixture{c: c, cl: c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), dlq: c.Topic(t, "orders.dlq", 2), src: c.Topic(t, "orders", 4), orig: map[string][]kgo.RecordHeader{}}
	orig := func(i int) []kgo.RecordHeader {
		return []kgo.RecordHeader{hdr("traceparent", fmt.Sprintf("00-%032d-%016d-01", i, i)), {Key: "raw", Value: []byte{0xde, 0xad, byte(i)}}}
	}
	malformed := springDLT(orig(9), fx.src, 1, 9)
	for i := range malformed {
		if malformed[i].Key == "kafka_dlt-original-partition" {
			malformed[i].Value = []byte{0, 0, 1} // 3 bytes, not an int
		}
	}
	letters := []struct {
		value   string
		key     []byte
		headers []kgo.RecordHeader
		redrive bool
	}{
		{`{"id":1,"total":`, []byte("order-1"), clitest.AntidoteHeaders(orig(1), fx.src, 1, 101), true},
		{"spring value", []byte("order-2"), springDLT(orig(2), fx.src, 2, 102), true},
		{"connect value", []byte("order-3"), connectDLQ(orig(3), fx.src, 3, 103), true},
		{"\x00\x00\x00\x00\x2a\x02", []byte("order-4"), streamsDLQ(orig(4), fx.src, 0, 104), true},
		{"share value", []byte("order-5"), shareDLQ(fx.src, 1, 105), true},
		{"malformed value", []byte("order-9"), malformed, false},
		{"looping value", []byte("order-6"), clitest.AntidoteHeaders(append(orig(6), hdr(deadletter.HeaderRedriveCount, "3")), fx.src, 2, 106), false},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range letters {
		r := &kgo.Record{Topic: fx.dlq, Partition: 0, Key: l.key, Value: []byte(l.value), Headers: l.headers}
		if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		fx.values = append(fx.values, l.value)
		if l.redrive {
			o := []kgo.RecordHeader{}
			if !strings.HasPrefix(l.value, "share") {
				n := map[string]int{"spring value": 10, "connect value": 10, "\x00\x00\x00\x00\x2a\x02": 6}[l.value]
				o = l.headers[:len(l.headers)-n]
				if strings.HasPrefix(l.value, "{") {
					o = l.headers[:2]
				}
			}
			fx.orig[l.value] = o
		}
	}
	return fx
}

// jsonLines decodes JSON Lines.
func jsonLines[T any](out string) ([]T, error) {
	var vs []T
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return vs, err
		}
		vs = append(vs, v)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			return vs, fmt.Errorf("not one JSON value per line: %q", line)
		}
	}
	return vs, nil
}

func TestIntegrationDLQReaders(t *testing.T) {
	fx := newDLQFixture(t)
	t.Logf("cluster %s", fx.c)

	code, out, errOut := fx.run(t, "dlq", "ls", "--topic", fx.dlq, "-o", "json")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, errOut)
	}
	ls, err := jsonLines[dlqLetterJSON](out)
	if err != nil {
		t.Fatalf("ls -o json: %v\n%s", err, out)
	}
	if len(ls) != len(fx.values) {
		t.Fatalf("ls: %d letters, want %d", len(ls), len(fx.values))
	}
	want := []struct {
		dialect, stage string
		partition      int32
		offset         int64
	}{
		{"antidote", "deserialize-value", 1, 101},
		{"spring", "process", 2, 102},
		{"connect", "VALUE_CONVERTER", 3, 103},
		{"streams", "", 0, 104},
		{"share-group", "", 1, 105},
		{"spring", "process", -1, 9}, // malformed partition
		{"antidote", "deserialize-value", 2, 106},
	}
	for i, w := range want {
		g := ls[i]
		if g.Offset != int64(i) || g.Dialect != w.dialect || g.Stage != w.stage {
			t.Errorf("letter %d: offset %d dialect %s stage %q, want %d %s %q", i, g.Offset, g.Dialect, g.Stage, i, w.dialect, w.stage)
		}
		if g.Original.Topic == nil || *g.Original.Topic != fx.src {
			t.Errorf("letter %d (%s): original topic %v", i, w.dialect, g.Original.Topic)
		}
		if w.partition >= 0 && (g.Original.Partition == nil || *g.Original.Partition != w.partition) {
			t.Errorf("letter %d (%s): original partition %v, want %d", i, w.dialect, g.Original.Partition, w.partition)
		}
		if g.Original.Offset == nil || *g.Original.Offset != w.offset {
			t.Errorf("letter %d (%s): original offset %v, want %d", i, w.dialect, g.Original.Offset, w.offset)
		}
	}
	if e := ls[5].Error; !strings.Contains(e, "kafka_dlt-original-partition") || !strings.Contains(e, "4-byte") {
		t.Errorf("malformed letter: error %q, want the header named", e)
	}
	if ls[6].Redrives != 3 || ls[4].Attempts != 5 || ls[1].Group != "orders-service" || ls[1].CauseType != "java.lang.IllegalStateException" {
		t.Errorf("details: %+v %+v %+v", ls[6], ls[4], ls[1])
	}

	// The table.
	code, out, errOut = fx.run(t, "dlq", "ls", "--topic", fx.dlq)
	if code != 0 || !strings.Contains(out, "PARTITION") || !strings.Contains(out, fx.src+"[3]@103") || !strings.Contains(out, "! malformed") {
		t.Errorf("ls table: exit %d\n%s%s", code, out, errOut)
	}

	// Filters.
	for _, tc := range []struct {
		args []string
		n    int
	}{
		{[]string{"--original-topic", fx.src}, 7},
		{[]string{"--original-topic", "nope"}, 0},
		{[]string{"--stage", "DESERIALIZE-VALUE"}, 2},
		{[]string{"--class", "permanent"}, 2},
		{[]string{"--reason", "IllegalState"}, 2},
		{[]string{"--reason", "delivery count"}, 1},
		{[]string{"--since", "1h"}, 7},
		{[]string{"--until", "1h"}, 0},
		{[]string{"--since", time.Now().Add(time.Hour).Format(time.RFC3339)}, 0},
	} {
		code, out, errOut := fx.run(t, append([]string{"dlq", "ls", "--topic", fx.dlq, "-o", "json"}, tc.args...)...)
		got, err := jsonLines[dlqLetterJSON](out)
		if code != 0 || err != nil || len(got) != tc.n {
			t.Errorf("ls %v: exit %d, %d letters, want %d (%s)", tc.args, code, len(got), tc.n, errOut)
		}
	}

	// show: every header decoded, Spring's binary ints as numbers.
	code, out, errOut = fx.run(t, "dlq", "show", "--topic", fx.dlq, "0:1", "-o", "json")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	var show dlqShowOut
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatalf("show -o json: %v\n%s", err, out)
	}
	decoded := map[string]string{}
	for _, h := range show.Headers {
		decoded[h.Key] = h.Decoded
	}
	if decoded["kafka_dlt-original-partition"] != "2" || decoded["kafka_dlt-original-offset"] != "102" || show.Value.As != "text" || *show.Value.Text != "spring value" {
		t.Errorf("show: decoded %v, value %+v", decoded, show.Value)
	}
	if len(show.Headers) != 12 || show.OriginalHeaders != 2 || show.Headers[1].Hex != "dead02" {
		t.Errorf("show: %d headers, %d original, raw header %+v", len(show.Headers), show.OriginalHeaders, show.Headers[1])
	}
	code, out, _ = fx.run(t, "dlq", "show", "--topic", fx.dlq, "--partition", "0", "--offset", "1")
	if code != 0 || !strings.Contains(out, "kafka_dlt-original-partition") || !strings.Contains(out, "2  (binary, 4 bytes)") {
		t.Errorf("show table: exit %d\n%s", code, out)
	}
	// Binary value: hex; JSON value: JSON; forced forms.
	for _, tc := range []struct {
		at, as, form string
	}{
		{"0:3", "auto", "hex"}, {"0:0", "auto", "text"}, {"0:4", "json", "hex"}, {"0:3", "text", "text"}, {"0:1", "hex", "hex"},
	} {
		code, out, errOut := fx.run(t, "dlq", "show", "--topic", fx.dlq, tc.at, "--as", tc.as, "-o", "json")
		var s dlqShowOut
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Value.As != tc.form {
			t.Errorf("show %s --as %s: exit %d, value as %q, want %q (%s)", tc.at, tc.as, code, s.Value.As, tc.form, errOut)
		}
	}
	code, out, _ = fx.run(t, "dlq", "show", "--topic", fx.dlq, "0:5")
	if code != 0 || !strings.Contains(out, "! ") || !strings.Contains(out, "malformed: 3 bytes, want 4") {
		t.Errorf("show malformed: exit %d\n%s", code, out)
	}
	code, _, errOut = fx.run(t, "dlq", "show", "--topic", fx.dlq, "0:99")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "no record at 0:99")

	// stats.
	code, out, errOut = fx.run(t, "dlq", "stats", "--topic", fx.dlq, "-o", "json")
	var st *dlqStats
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("stats: exit %d: %s%s", code, out, errOut)
	}
	wantDialects := map[string]int{"antidote": 2, "spring": 2, "connect": 1, "streams": 1, "share-group": 1}
	if st.Total != 7 || st.Malformed != 1 || !reflect.DeepEqual(st.ByDialect, wantDialects) || st.ByOriginalTopic[fx.src] != 7 ||
		st.ByReason["permanent"] != 2 || st.ByStage["VALUE_CONVERTER"] != 1 || st.ByClass["permanent"] != 2 {
		t.Errorf("stats: %+v", st)
	}
	code, out, _ = fx.run(t, "dlq", "stats", "--topic", fx.dlq)
	if code != 0 || !strings.Contains(out, "7 dead letters") || !strings.Contains(out, "by original topic") {
		t.Errorf("stats table: exit %d\n%s", code, out)
	}
}

func TestIntegrationDLQRedrive(t *testing.T) {
	fx := newDLQFixture(t)
	redrive := func(args ...string) dlqRedriveJSON {
		t.Helper()
		code, out, errOut := fx.run(t, append([]string{"dlq", "redrive", "--topic", fx.dlq, "-o", "json"}, args...)...)
		var r dlqRedriveJSON
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("redrive %v: exit %d\n%s%s", args, code, out, errOut)
		}
		if !strings.Contains(errOut, "redrive "+fx.dlq) {
			t.Errorf("no progress on stderr: %q", errOut)
		}
		return r
	}
	r := redrive("--dry-run")
	if !r.DryRun || r.Redriven != 5 || r.Refused != 2 {
		t.Fatalf("dry run: %+v", r)
	}
	// Interrupted after two records (--limit), then resumed.
	first := redrive("--limit", "2")
	rest := redrive()
	if first.Redriven != 2 || first.Redriven+rest.Redriven != 5 || first.Refused+rest.Refused != 2 || rest.Group != first.Group {
		t.Fatalf("redrive: first %+v, then %+v", first, rest)
	}
	var loopRefused bool
	for _, f := range rest.Refusals {
		loopRefused = loopRefused || strings.Contains(f.Reason, "redriven 3 times already (max 3)")
	}
	if !loopRefused {
		t.Errorf("loop guard: refusals %+v", rest.Refusals)
	}
	if again := redrive(); again.Scanned != 0 || again.Redriven != 0 {
		t.Errorf("third run: %+v", again)
	}

	// Each record is back exactly once, byte for byte.
	got := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := deadletter.Scan(ctx, fx.cl, deadletter.ScanConfig{Topic: fx.src, IdleTimeout: 5 * time.Second}, func(r *kgo.Record) error {
		v := string(r.Value)
		got[v]++
		want, ok := fx.orig[v]
		if !ok {
			t.Errorf("unexpected record %q", v)
			return nil
		}
		n := len(r.Headers)
		if n != len(want)+2 || !reflect.DeepEqual(clitest.CopyHeaders(r.Headers[:n-2]), clitest.CopyHeaders(want)) {
			t.Errorf("%q: headers %v, want %v + provenance", v, r.Headers, want)
			return nil
		}
		if r.Headers[n-2].Key != deadletter.HeaderRedriveCount || string(r.Headers[n-2].Value) != "1" ||
			r.Headers[n-1].Key != deadletter.HeaderRedriveFrom || !strings.HasPrefix(string(r.Headers[n-1].Value), fx.dlq+"/0/") {
			t.Errorf("%q: provenance %v", v, r.Headers[n-2:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for v := range fx.orig {
		if got[v] != 1 {
			t.Errorf("%q arrived %d times, want once", v, got[v])
		}
	}

	// The table summary.
	code, out, _ := fx.run(t, "dlq", "redrive", "--topic", fx.dlq, "--group", "fresh-"+fx.dlq, "--dry-run", "--rate", "1000")
	if code != 0 || !strings.Contains(out, "would redrive") || !strings.Contains(out, "refused") {
		t.Errorf("redrive table: exit %d\n%s", code, out)
	}
}

func TestIntegrationDLQErrors(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	t.Setenv(EnvTopic, "")
	c := kafkatest.New(t)
	brokers := strings.Join(c.Brokers(), ",")
	for _, tc := range []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"dlq", "ls"}, cli.ExitUsage, "--topic is required"},
		{[]string{"dlq", "redrive"}, cli.ExitUsage, "--topic is required"},
		{[]string{"dlq", "ls", "--topic", "no-such-dlq", "--brokers", brokers}, cli.ExitFailure, `topic "no-such-dlq" does not exist`},
		{[]string{"dlq", "stats", "--topic", "no-such-dlq", "--brokers", brokers}, cli.ExitFailure, `topic "no-such-dlq" does not exist`},
		{[]string{"dlq", "ls", "--topic", "t", "--brokers", "127.0.0.1:1", "--timeout", "2s"}, cli.ExitFailure, "cannot reach Kafka at 127.0.0.1:1: unable to dial"},
		{[]string{"dlq", "redrive", "--topic", "t", "--brokers", "127.0.0.1:1", "--timeout", "2s"}, cli.ExitFailure, "cannot reach Kafka"},
		{[]string{"dlq", "ls", "--topic", "t", "--since", "last week"}, cli.ExitUsage, "--since"},
		{[]string{"dlq", "ls", "--topic", "t", "--since", "1h", "--until", "2h"}, cli.ExitUsage, "is not before"},
		{[]string{"dlq", "show", "--topic", "t"}, cli.ExitUsage, "which record"},
		{[]string{"dlq", "show", "--topic", "t", "zero:one"}, cli.ExitUsage, "PARTITION:OFFSET"},
		{[]string{"dlq", "show", "--topic", "t", "0:1", "--as", "yaml"}, cli.ExitUsage, "--as"},
		{[]string{"dlq", "redrive", "--topic", "t", "--max-redrives", "0"}, cli.ExitUsage, "--max-redrives"},
		{[]string{"dlq", "redrive", "--topic", "t", "--to", "t"}, cli.ExitUsage, "dead-letter topic itself"},
		{[]string{"dlq", "redrive", "--topic", "t", "--rate", "-1"}, cli.ExitUsage, "--rate"},
		{[]string{"dlq", "nope"}, cli.ExitUsage, "unknown command"},
		// Typos are refused, with what was meant.
		{[]string{"dlq", "sho"}, cli.ExitUsage, `unknown command "sho" for "antidote dlq" (did you mean show?)`},
		{[]string{"dlq", "ls", "--topic", "t", "--class", "perm"}, cli.ExitUsage, `--class "perm": want one of permanent, transient, unclassified (did you mean permanent?)`},
		{[]string{"dlq", "stats", "--topic", "t", "--stage", "proces"}, cli.ExitUsage, `--stage "proces": want one of deserialize-key, deserialize-value, process,`},
		{[]string{"dlq", "redrive", "--topic", "t", "--class", "Transient-ish"}, cli.ExitUsage, `--class "Transient-ish"`},
		{[]string{"dlq", "ls", "--topic", "t", "--limit", "abc"}, cli.ExitUsage, `--limit "abc": want a whole number`},
		{[]string{"dlq", "ls", "--topic", "t", "--partition", "one"}, cli.ExitUsage, `--partition "one": want whole numbers`},
		{[]string{"dlq", "redrive", "--topic", "t", "--rate", "fast"}, cli.ExitUsage, `--rate "fast": want a number`},
	} {
		start := time.Now()
		code, _, errOut := runCmd(t, tc.args...)
		clitest.CheckOneLineError(t, code, tc.code, errOut, tc.contains)
		if strings.Contains(errOut, "strconv.") {
			t.Errorf("%v: the parser's own error: %s", tc.args, errOut)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%v took %v", tc.args, d)
		}
	}
	// An empty topic: no letters, no hang.
	empty := c.Topic(t, "empty.dlq", 3)
	code, out, errOut := runCmd(t, "dlq", "ls", "--topic", empty, "--brokers", brokers, "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("empty topic: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv(EnvTopic, empty)
	code, out, _ = runCmd(t, "dlq", "stats", "--brokers", brokers)
	if code != 0 || !strings.Contains(out, "0 dead letters") {
		t.Errorf("topic from %s: exit %d, %q", EnvTopic, code, out)
	}
}
