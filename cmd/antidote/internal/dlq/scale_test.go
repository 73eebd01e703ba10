package dlq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

func TestIntegrationDLQLsRanges(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	dlq, src := c.Topic(t, "orders.dlq", 2), c.Topic(t, "orders", 2)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 300)
	clitest.ProduceLetters(t, cl, dlq, src, 1, 300, hdr(deadletter.HeaderRedriveCount, "2"), hdr(deadletter.HeaderRedriveFrom, dlq+"/1/7"))
	b := strings.Join(c.Brokers(), ",")
	ls := func(args ...string) []dlqLetterJSON {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"dlq", "ls", "--topic", dlq, "--brokers", b, "-o", "json"}, args...)...)
		got, err := jsonLines[dlqLetterJSON](out)
		if code != 0 || err != nil {
			t.Fatalf("ls %v: exit %d, %v: %s", args, code, err, errOut)
		}
		return got
	}
	if got := ls("--limit", "7"); len(got) != 7 {
		t.Errorf("--limit 7: %d letters", len(got))
	}
	got := ls("--partition", "1", "--offset", "10-19")
	if len(got) != 10 || got[0].Offset != 10 || got[9].Offset != 19 || got[0].Partition != 1 {
		t.Errorf("--partition 1 --offset 10-19: %d letters, first %+v", len(got), got)
	}
	if got[0].Redrives != 2 || got[0].RedrivenFrom != dlq+"/1/7" {
		t.Errorf("redriven letter: redrives %d from %q", got[0].Redrives, got[0].RedrivenFrom)
	}
	if got := ls("--partition", "0", "--offset", "295"); len(got) != 5 {
		t.Errorf("--offset 295: %d letters", len(got))
	}
	if got := ls("--key", "k42"); len(got) != 2 || got[0].Offset != 42 {
		t.Errorf("--key k42: %+v", got)
	}
	// YAML: one document per letter.
	code, out, _ := runCmd(t, "dlq", "ls", "--topic", dlq, "--brokers", b, "-o", "yaml", "--limit", "3")
	docs := strings.Split(strings.TrimPrefix(out, "---\n"), "---\n")
	var y dlqLetterJSON
	if code != 0 || len(docs) != 3 || yaml.Unmarshal([]byte(docs[2]), &y) != nil || y.Dialect != "antidote" {
		t.Errorf("-o yaml: exit %d, %d documents, %+v\n%s", code, len(docs), y, out)
	}
	// The table, wide, without headers.
	code, out, _ = runCmd(t, "dlq", "ls", "--topic", dlq, "--brokers", b, "--partition", "1", "--limit", "2", "-o", "wide", "--no-headers")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || strings.Contains(out, "PARTITION") || !strings.Contains(lines[0], "2 ("+dlq+"/1/7)") || !strings.Contains(lines[0], "k0") {
		t.Errorf("-o wide --no-headers: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "dlq", "ls", "--topic", dlq, "--brokers", b)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 601 || !strings.HasPrefix(lines[0], "PARTITION") || !strings.Contains(lines[0], "REDRIVES") {
		t.Errorf("table: exit %d, %d lines, header %q", code, len(lines), lines[0])
	}
	for _, tc := range []struct {
		args     []string
		contains string
	}{
		{[]string{"--offset", "5"}, "--offset needs --partition"},
		{[]string{"--partition", "0", "--offset", "9-3"}, "--offset"},
		{[]string{"--limit", "-1"}, "--limit"},
	} {
		code, _, errOut := runCmd(t, append([]string{"dlq", "ls", "--topic", dlq, "--brokers", b}, tc.args...)...)
		clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, tc.contains)
	}
	code, _, errOut := runCmd(t, "dlq", "ls", "--topic", dlq, "--brokers", b, "--partition", "7")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "no partition 7")
}

// --follow lists letters produced after it started, until interrupted.
func TestIntegrationDLQLsFollow(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src := c.Topic(t, "orders.dlq", 1), c.Topic(t, "orders", 1)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut clitest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"dlq", "ls", "--topic", dlq, "--brokers", strings.Join(c.Brokers(), ","), "--follow", "-o", "json"}, &out, &errOut)
	}()
	waitFor := func(n int) {
		t.Helper()
		for ctx.Err() == nil {
			if strings.Count(out.String(), "\n") >= n {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("waiting for %d lines: %q %q", n, out.String(), errOut.String())
	}
	waitFor(2)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 1)
	waitFor(3)
	cancel()
	if code := <-done; code != cli.ExitOK && code != cli.ExitInterrupted {
		t.Errorf("exit %d: %s", code, errOut.String())
	}
	got, err := jsonLines[dlqLetterJSON](out.String())
	if err != nil || len(got) != 3 || got[2].Offset != 2 {
		t.Errorf("follow: %+v, %v", got, err)
	}
}

func TestIntegrationDLQStatsAndWarnings(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	dlq, src := c.Topic(t, "orders.dlq", 1), c.Topic(t, "orders", 1)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 50)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 10, hdr(deadletter.HeaderRedriveCount, "1"))
	b := strings.Join(c.Brokers(), ",")
	code, out, errOut := runCmd(t, "dlq", "stats", "--topic", dlq, "--brokers", b, "-o", "yaml")
	var st dlqStats
	if code != 0 || yaml.Unmarshal([]byte(out), &st) != nil || st.Total != 60 || st.Redriven != 10 || st.ByRedrives["1"] != 10 || st.ByRedrives["0"] != 50 {
		t.Errorf("stats -o yaml: exit %d, %+v\n%s%s", code, st, out, errOut)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("warning on a dead-letter topic: %s", errOut)
	}
	// A topic of plain records is probably not a dead-letter topic.
	plain := c.Topic(t, "plain", 1)
	for i := range 5 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: plain, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"ls", "stats"} {
		code, _, errOut := runCmd(t, "dlq", sub, "--topic", plain, "--brokers", b)
		if code != 0 || !strings.Contains(errOut, "none of the 5 records") || !strings.Contains(errOut, "probably not a dead-letter topic") {
			t.Errorf("%s of a plain topic: exit %d, stderr %q", sub, code, errOut)
		}
	}
}

func TestIntegrationDLQRedriveScale(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	dlq, src := c.Topic(t, "orders.dlq", 2), c.Topic(t, "orders", 2)
	const n = 20000
	clitest.ProduceLetters(t, cl, dlq, src, 0, n/2)
	clitest.ProduceLetters(t, cl, dlq, src, 1, n/2)
	b := strings.Join(c.Brokers(), ",")
	redrive := func(args ...string) dlqRedriveJSON {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"dlq", "redrive", "--topic", dlq, "--brokers", b, "-o", "json"}, args...)...)
		var r dlqRedriveJSON
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("redrive %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return r
	}
	// A relative --since resumes: the same group, nothing twice.
	start := time.Now()
	first := redrive("--since", "7d", "--limit", "5000")
	second := redrive("--since", "7d")
	t.Logf("%s: %d letters redriven in %v", c.Kind(), first.Redriven+second.Redriven, time.Since(start))
	if first.Group != second.Group || first.Redriven != 5000 || second.Redriven != n-5000 {
		t.Fatalf("first %+v, then %+v", first, second)
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(context.Background(), src)
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if err != nil || total != n {
		t.Errorf("target holds %d records, want %d (%v)", total, n, err)
	}
	// Exactly once: a transactional redrive to another topic.
	replay := c.Topic(t, "replay", 1)
	eos := redrive("--exactly-once", "--to", replay, "--batch", "700")
	if !eos.ExactlyOnce || eos.Redriven != n {
		t.Fatalf("exactly-once: %+v", eos)
	}
	got := 0
	rc := c.Client(t, deadletter.ScanOpts()...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := deadletter.Scan(ctx, rc, deadletter.ScanConfig{Topic: replay}, func(*kgo.Record) error { got++; return nil }); err != nil || got != n {
		t.Errorf("read_committed: %d records of %d, %v", got, n, err)
	}
	// A missing target: the command to create it, nothing produced.
	code, _, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b, "--to", "no-such-replay", "--group", "g-"+dlq)
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, `target topic "no-such-replay" does not exist`)
	if !strings.Contains(errOut, "kafka-topics.sh --bootstrap-server "+c.Brokers()[0]+" --create --topic no-such-replay --partitions 2") {
		t.Errorf("no create command: %s", errOut)
	}
}

func TestIntegrationDLQPurge(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src := c.Topic(t, "orders.dlq", 2), c.Topic(t, "orders", 2)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 10)
	clitest.ProduceLetters(t, cl, dlq, src, 1, 10)
	b := strings.Join(c.Brokers(), ",")
	// No terminal, no --yes: nothing deleted.
	code, _, errOut := runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--offset", "4")
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "add --yes")
	code, out, errOut := runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--partition", "0", "--offset", "4", "--yes")
	if code != 0 || !strings.Contains(out, "deleted 4 records") {
		t.Fatalf("purge: exit %d\n%s%s", code, out, errOut)
	}
	starts, _, err := deadletter.Bounds(context.Background(), cl, dlq)
	if err != nil || starts[0] != 4 || starts[1] != 0 {
		t.Errorf("log starts %v, %v", starts, err)
	}
	// --redriven: below the redrive's progress.
	if code, _, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b, "--limit", "3", "--batch", "1"); code != 0 {
		t.Fatalf("redrive: %s", errOut)
	}
	code, out, errOut = runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--redriven", "--yes")
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("purge --redriven: exit %d\n%s%s", code, out, errOut)
	}
	starts, _, _ = deadletter.Bounds(context.Background(), cl, dlq)
	if starts[0]+starts[1] != 7 {
		t.Errorf("after --redriven, log starts %v: want 3 more letters gone", starts)
	}
	code, out, _ = runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--all", "--yes")
	starts, _, _ = deadletter.Bounds(context.Background(), cl, dlq)
	if code != 0 || starts[0] != 10 || starts[1] != 10 {
		t.Errorf("purge --all: exit %d, starts %v\n%s", code, starts, out)
	}
	code, _, errOut = runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b)
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "exactly one of")
}

// spring41Letter is a Spring Kafka 4.1 dead letter of a value that failed to
// deserialize, as the recoverer writes it with retainExceptionHeader and a
// JsonSerializer template (see deadletter's dialect tests for the sources).
func spring41Letter(orig []kgo.RecordHeader, topic string, partition int32, offset int64) []kgo.RecordHeader {
	blob := append([]byte{0xac, 0xed, 0x00, 0x05, 0x73, 0x72}, make([]byte, 3000)...)
	return append(append([]kgo.RecordHeader{}, orig...),
		kgo.RecordHeader{Key: "springDeserializerExceptionValue", Value: blob},
		hdr("kafka_dlt-exception-fqcn", "org.springframework.kafka.support.serializer.DeserializationException"),
		hdr("kafka_dlt-exception-cause-fqcn", "tools.jackson.core.exc.StreamReadException"),
		hdr("kafka_dlt-exception-message", "failed to deserialize"),
		hdr("kafka_dlt-exception-stacktrace", "org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize\n"+
			"\tat org.springframework.kafka.support.serializer.SerializationUtils.deserializationException(SerializationUtils.java:158)\n"+
			"Caused by: java.io.CharConversionException: Invalid UTF-8 start byte 0xff (at char #3, byte #-1)\n\t... 31 more\n"),
		hdr("kafka_dlt-original-topic", topic),
		kgo.RecordHeader{Key: "kafka_dlt-original-partition", Value: binary.BigEndian.AppendUint32(nil, uint32(partition))},
		kgo.RecordHeader{Key: "kafka_dlt-original-offset", Value: binary.BigEndian.AppendUint64(nil, uint64(offset))},
		kgo.RecordHeader{Key: "kafka_dlt-original-timestamp", Value: binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixMilli()))},
		hdr("kafka_dlt-original-timestamp-type", "CreateTime"),
		hdr("__TypeId__", "[B"),
	)
}

func TestIntegrationDLQSpring41(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src := c.Topic(t, "orders.DLT", 1), c.Topic(t, "orders", 1)
	orig := []kgo.RecordHeader{hdr("__TypeId__", "com.example.Order"), hdr("traceparent", "00-1-2-01")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		r := &kgo.Record{Topic: dlq, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("{\xff\xfe}"), Headers: spring41Letter(orig, src, 0, int64(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b := strings.Join(c.Brokers(), ",")
	code, out, errOut := runCmd(t, "dlq", "ls", "--topic", dlq, "--brokers", b, "--reason", "Invalid UTF-8", "-o", "json")
	got, err := jsonLines[dlqLetterJSON](out)
	if code != 0 || err != nil || len(got) != 3 || got[0].Original.TimestampType != "CreateTime" || !strings.Contains(got[0].RootCause, "CharConversionException") {
		t.Fatalf("ls --reason: exit %d, %+v, %v %s", code, got, err, errOut)
	}
	code, out, _ = runCmd(t, "dlq", "ls", "--topic", dlq, "--brokers", b)
	if code != 0 || !strings.Contains(out, "CharConversionException: Invalid UTF-8") {
		t.Errorf("the table does not show the cause:\n%s", out)
	}
	code, out, _ = runCmd(t, "dlq", "show", "--topic", dlq, "--brokers", b, "0:0", "-o", "json")
	var show dlqShowOut
	if code != 0 || json.Unmarshal([]byte(out), &show) != nil || show.OriginalHeaders != 2 || show.MetadataHeaders != 2 {
		t.Fatalf("show: exit %d, %+v", code, show)
	}
	kinds := map[string][]string{}
	for _, h := range show.Headers {
		kinds[h.Key] = append(kinds[h.Key], h.Kind)
	}
	if strings.Join(kinds["__TypeId__"], ",") != "original,metadata" || strings.Join(kinds["springDeserializerExceptionValue"], ",") != "metadata" {
		t.Errorf("kinds %v", kinds)
	}
	code, out, _ = runCmd(t, "dlq", "show", "--topic", dlq, "--brokers", b, "0:0")
	if code != 0 || !strings.Contains(out, "2 spring metadata, never redriven") || !strings.Contains(out, "root cause") {
		t.Errorf("show table:\n%s", out)
	}
	// The redrive copies the original headers only.
	if code, _, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b); code != 0 {
		t.Fatalf("redrive: %s", errOut)
	}
	n := 0
	err = deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: src}, func(r *kgo.Record) error {
		n++
		var keys []string
		for _, h := range r.Headers {
			keys = append(keys, h.Key+"="+string(h.Value[:min(len(h.Value), 20)]))
		}
		if want := "__TypeId__=com.example.Order traceparent=00-1-2-01 antidote.redrive.count=1"; !strings.HasPrefix(strings.Join(keys, " "), want) || len(keys) != 4 {
			t.Errorf("redriven headers %v, want %s and the provenance", keys, want)
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Errorf("%d records redriven, %v", n, err)
	}
}

// TestIntegrationDLQPurgeRedriven: purge --redriven after a filtered
// redrive deletes only the letters before the first one the redrive
// passed over, says where it stopped, and a group with no progress is an
// error.
func TestIntegrationDLQPurgeRedriven(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src, other := c.Topic(t, "orders.dlq", 1), c.Topic(t, "orders", 1), c.Topic(t, "payments", 1)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 3)   // offsets 0-2: redriven
	clitest.ProduceLetters(t, cl, dlq, other, 0, 1) // offset 3: passed over
	clitest.ProduceLetters(t, cl, dlq, src, 0, 3)   // offsets 4-6: redriven
	b := strings.Join(c.Brokers(), ",")
	if code, out, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b, "--original-topic", src); code != 0 || !strings.Contains(out, "6") {
		t.Fatalf("redrive: exit %d\n%s%s", code, out, errOut)
	}
	group := (&deadletter.RedriveConfig{Topic: dlq, Filter: deadletter.Filter{OriginalTopic: src}}).DefaultGroup()
	logStart := func() int64 {
		starts, _, err := deadletter.Bounds(context.Background(), cl, dlq)
		if err != nil {
			t.Fatal(err)
		}
		return starts[0]
	}

	// The redrive's group without its filters: refused, nothing deleted.
	code, _, errOut := runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--redriven", "--group", group, "--yes")
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, "give purge the redrive's own filters")
	// A group that never redrove this topic: an error, nothing deleted.
	code, _, errOut = runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--redriven", "--yes")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "has no progress on "+dlq)
	code, _, errOut = runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--redriven", "--group", "no-such-group", "--yes")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "redrive group no-such-group has no progress")
	if s := logStart(); s != 0 {
		t.Fatalf("refused purges moved the log start to %d", s)
	}

	// With the redrive's filters: the three letters before the one it
	// passed over, and a line that says so.
	code, out, errOut := runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--redriven", "--original-topic", src, "--yes")
	if code != 0 {
		t.Fatalf("purge --redriven: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"partition 0: stops below offset 3, a letter that was not redriven (the redrive's filters passed over it); 4 letters", "deleted 3 records"} {
		if !strings.Contains(out, want) {
			t.Errorf("purge --redriven output lacks %q:\n%s", want, out)
		}
	}
	if s := logStart(); s != 3 {
		t.Errorf("log start %d after purge --redriven, want 3 (the letter at 3 was never redriven)", s)
	}
	// Again: nothing more to delete, and it says why.
	code, out, _ = runCmd(t, "dlq", "purge", "--topic", dlq, "--brokers", b, "--redriven", "--original-topic", src, "--yes")
	if code != 0 || !strings.Contains(out, "stops below offset 3") || !strings.Contains(out, "nothing to delete") {
		t.Errorf("second purge: exit %d\n%s", code, out)
	}
}

// TestIntegrationDLQRedrivePartition: dlq redrive puts records back in
// their original partition; --partitioner murmur2 by key; a typo is a
// usage error.
func TestIntegrationDLQRedrivePartition(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src := c.Topic(t, "orders.dlq", 1), c.Topic(t, "orders", 3)
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic(src)
	var rs []*kgo.Record
	for i := 0; len(rs) < 3; i++ {
		k := fmt.Sprint("k", i)
		if byKey.Partition(&kgo.Record{Key: []byte(k)}, 3) != 2 {
			rs = append(rs, &kgo.Record{Topic: dlq, Key: []byte(k), Value: []byte("v"), Headers: clitest.AntidoteHeaders(nil, src, 2, int64(i))})
		}
	}
	kafkatest.Produce(t, cl, rs...)
	b := strings.Join(c.Brokers(), ",")
	code, _, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b, "--partitioner", "crc32")
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, `--partitioner "crc32": want original or murmur2`)
	if code, out, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b); code != 0 {
		t.Fatalf("redrive: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd(t, "dlq", "redrive", "--topic", dlq, "--brokers", b, "--partitioner", "murmur2", "--group", "by-key"); code != 0 {
		t.Fatalf("redrive --partitioner murmur2: exit %d\n%s%s", code, out, errOut)
	}
	rc := c.Client(t, deadletter.ScanOpts()...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := map[int32]int{}
	if err := deadletter.Scan(ctx, rc, deadletter.ScanConfig{Topic: src}, func(r *kgo.Record) error {
		if r.Partition == 2 {
			in[2]++
		} else if r.Partition == int32(byKey.Partition(r, 3)) {
			in[-1]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if in[2] != 3 || in[-1] != 3 {
		t.Errorf("%d records in their original partition 2 (want 3), %d where murmur2 puts them (want 3)", in[2], in[-1])
	}
}
