package run

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// place is a record's partition and offset.
type place struct {
	p int32
	o int64
}

// startRun runs antidote run -c file in the process until the returned
// stop, which returns the exit code and the logs.
func startRun(t *testing.T, file string) (stop func() (int, string), stderr *clitest.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout clitest.SyncBuffer
	stderr = &clitest.SyncBuffer{}
	code := make(chan int, 1)
	go func() { code <- runContext(ctx, []string{"run", "-c", file, "--log-format", "json"}, &stdout, stderr) }()
	var once bool
	var c int
	stop = func() (int, string) {
		if !once {
			once = true
			cancel()
			select {
			case c = <-code:
			case <-time.After(60 * time.Second):
				t.Fatalf("antidote run did not stop within 60s after its context ended\n%s", stderr.String())
			}
		}
		return c, stderr.String()
	}
	t.Cleanup(func() { stop() })
	return stop, stderr
}

// readAll reads every record of topic up to its end offsets at the time
// of the call.
func readAll(t *testing.T, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	if want == 0 {
		return nil
	}
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d of %d records", topic, len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// countTopic is the number of records in topic (0 when it does not exist).
func countTopic(t *testing.T, adm *kadm.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	n := int64(0)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// waitCommittedAtEnd waits until the group has committed every partition of
// each topic up to its end, while antidote run still runs: everything was
// settled and committed. It is called before the drain, because a drain
// abandons the records in flight (a sink's effect, a document or a
// request, may be visible before its answer reached the consumer), so
// checking the commits only after the drain would race with that answer.
func waitCommittedAtEnd(t *testing.T, c *kafkatest.Cluster, group string, logs func() string, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(c.Client(t))
	var behind []string
	clitest.WaitFor(t, 90*time.Second, "the group to commit every record", func() bool {
		behind = uncommitted(t, adm, group, topics...)
		return len(behind) == 0
	}, func() string { return strings.Join(behind, "\n") + "\n" + logs() })
}

// checkCommittedAtEnd checks at once that the group committed every
// partition of topic up to its end.
func checkCommittedAtEnd(t *testing.T, c *kafkatest.Cluster, group, topic string) {
	t.Helper()
	for _, b := range uncommitted(t, kadm.NewClient(c.Client(t)), group, topic) {
		t.Error(b)
	}
}

// uncommitted lists the partitions of topics the group has not committed
// up to their ends, and what could not be read (a topic whose ends or the
// group's offsets cannot be listed counts as behind, never as empty).
func uncommitted(t *testing.T, adm *kadm.Client, group string, topics ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return []string{fmt.Sprintf("the ends of %v: %v", topics, err)}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return []string{fmt.Sprintf("the offsets of group %s: %v", group, err)}
	}
	var behind []string
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			behind = append(behind, fmt.Sprintf("%s/%d: its end: %v", e.Topic, e.Partition, e.Err))
			return
		}
		got, ok := committed.Lookup(e.Topic, e.Partition)
		if e.Offset == 0 && !ok {
			return // an empty partition: nothing to commit
		}
		if !ok || got.At != e.Offset {
			behind = append(behind, fmt.Sprintf("group %s, %s/%d: committed %v (found %v), end %d", group, e.Topic, e.Partition, got.At, ok, e.Offset))
		}
	})
	sort.Strings(behind)
	return behind
}

// startService starts the Python record service and returns its URL.
func startService(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not found: the HTTP sink's foreign service needs it (the standard library only)")
		}
		t.Skip("python3 not found")
	}
	return "http://127.0.0.1:" + startPython(t, py, "testdata/run/service.py")
}

// startPython runs script with py until the test ends and returns the
// first line it prints (its ports).
func startPython(t *testing.T, py, script string) string {
	t.Helper()
	cmd := exec.Command(py, script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		if l == "" {
			t.Fatalf("%s printed no port", script)
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start within 60s", script)
	}
	return ""
}

// serviceStats is what the Python service saw.
type serviceStats struct {
	Tries    map[string][]int `json:"tries"`
	Accepted map[string]int   `json:"accepted"`
	Rejected map[string]any   `json:"rejected"`
	Mismatch []string         `json:"mismatch"`
	Batches  []int            `json:"batches"`
}

func getStats(t *testing.T, base string) serviceStats {
	t.Helper()
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s serviceStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// adminFromLogs finds the admin API's URL in the JSON logs.
func adminFromLogs(logs string) string {
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "admin API and /metrics" {
			u, _ := m["url"].(string)
			return u
		}
	}
	return ""
}

// TestIntegrationRunHTTPPython: antidote run pushes a topic to a Python
// service that fails some records transiently (503, 429 with
// Retry-After) and rejects others (422, Antidote-Outcome: permanent);
// poison pills never reach it. Every record ends up accepted by the
// service or in the dead-letter topic, once, with the right stage; the
// hostile keys and headers reach the service intact; the offsets are
// committed to the end at the drain, and /metrics counts per pipeline.
func TestIntegrationRunHTTPPython(t *testing.T) {
	base := startService(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "run-http", 3)
	group := kafkatest.UniqueName("run-http")
	cl := c.Client(t)

	kinds := []string{"ok", "ok", "transient", "ok", "permanent", "ok", "verdict-permanent", "poison", "ok", "transient", "poison", "ok"}
	const n = 96
	kindOf := map[place]string{}
	idOf := map[place]int{}
	for i := range n {
		kind := kinds[i%len(kinds)]
		if i == 5 || i == 41 {
			kind = "retry-after"
		}
		key := []byte(fmt.Sprintf("key-%d\r\nX-Evil: 1\x00\xff,", i))
		hv := []byte(fmt.Sprintf("t=%d, \x00é\r\n", i))
		value, _ := json.Marshal(map[string]any{"id": i, "kind": kind, "key_hex": hex.EncodeToString(key), "header_hex": hex.EncodeToString(hv)})
		if kind == "poison" {
			value = append([]byte("\x00not json "), value...)
		}
		r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: "trace", Value: hv}}}
		res := cl.ProduceSync(context.Background(), r)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		pl := place{r.Partition, r.Offset}
		kindOf[pl], idOf[pl] = kind, i
	}

	dir := t.TempDir()
	cfg := fmt.Sprintf(`kafka:
  brokers: [%s]
admin:
  address: 127.0.0.1:0
  token: ${file:token}
pipelines:
  - name: svc
    topics: [%s]
    group: %s
    value: {format: json}
    commit-interval: 500ms
    sink:
      http:
        url: %s/records
        timeout: 10s
        concurrency: 4
    policy:
      process:
        transient:
          retry: {initial: 50ms, max: 200ms, attempts: 0}
`, strings.Join(c.Brokers(), ", "), topic, group, base)
	file := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	wantAccepted := map[string]bool{}
	wantDead := map[place]string{}
	for pl, k := range kindOf {
		switch k {
		case "ok", "transient", "retry-after":
			wantAccepted[fmt.Sprint(idOf[pl])] = true
		default:
			wantDead[pl] = k
		}
	}
	start := time.Now()
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	dlq := topic + ".dlq"
	clitest.WaitFor(t, 120*time.Second, "every record accepted or dead-lettered", func() bool {
		s := getStats(t, base)
		return len(s.Accepted) >= len(wantAccepted) && countTopic(t, adm, dlq) >= int64(len(wantDead))
	}, logs.String)
	t.Logf("%d records through the Python service and the dead-letter topic in %v (%s)", n, time.Since(start).Round(time.Millisecond), c.Kind())

	// /metrics of the pipeline, through the admin API.
	u := adminFromLogs(logs.String())
	if u == "" {
		t.Fatalf("no admin URL in the logs:\n%s", logs.String())
	}
	var fams map[string]float64
	clitest.WaitFor(t, 20*time.Second, "the metrics to count every record", func() bool {
		m := clitest.ScrapeMetrics(t, u, "test-token")
		fams = map[string]float64{
			"processed": clitest.FamilySum(m, "antidote_records_total", "outcome", "processed"),
			"dead":      clitest.FamilySum(m, "antidote_records_total", "outcome", "dead-lettered"),
			"pipeline":  clitest.FamilySum(m, "antidote_records_total", "pipeline", "svc"),
		}
		return fams["processed"] >= float64(len(wantAccepted)) && fams["dead"] >= float64(len(wantDead))
	}, logs.String)
	if fams["pipeline"] < float64(n) {
		t.Errorf("antidote_records_total{pipeline=\"svc\"} = %v, want %d", fams["pipeline"], n)
	}
	// The web console of the pipelines, under /ui/ with the same token.
	req, _ := http.NewRequest(http.MethodGet, u+"/ui/consumers/svc", nil)
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "svc") {
		t.Errorf("GET /ui/consumers/svc: %d\n%.400s", resp.StatusCode, page)
	}

	// Checked after the drain on purpose: the metrics counted every record
	// settled, so each is marked for commit, and the drain's final commit
	// must carry them (the tests that wait only for a sink's effect wait
	// for the commits before the drain instead: waitCommittedAtEnd).
	code, out := stop()
	if code != 0 {
		t.Fatalf("exit %d after the drain\n%s", code, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("a log line is no JSON: %q", line)
		}
	}

	s := getStats(t, base)
	if len(s.Mismatch) > 0 {
		t.Fatalf("the service saw keys or headers that do not decode to the record's bytes: ids %v", s.Mismatch)
	}
	for id := range wantAccepted {
		if s.Accepted[id] < 1 {
			t.Errorf("record %s was not accepted", id)
		}
	}
	for id, times := range s.Accepted {
		if !wantAccepted[id] {
			t.Errorf("record %s accepted, want it rejected", id)
		}
		if times > 1 {
			t.Logf("record %s accepted %d times (at least once)", id, times)
		}
	}
	for pl, k := range kindOf {
		id := fmt.Sprint(idOf[pl])
		switch k {
		case "transient":
			if got := fmt.Sprint(s.Tries[id]); got != "[1 2 3]" {
				t.Errorf("transient record %s: tries with Antidote-Attempt %s, want [1 2 3]", id, got)
			}
		case "retry-after":
			if got := fmt.Sprint(s.Tries[id]); got != "[1 2]" {
				t.Errorf("retry-after record %s: tries %s, want [1 2]", id, got)
			}
		case "poison":
			if len(s.Tries[id]) > 0 {
				t.Errorf("poison pill %s reached the service", id)
			}
		case "permanent", "verdict-permanent":
			if len(s.Tries[id]) != 1 {
				t.Errorf("rejected record %s tried %d times, want once", id, len(s.Tries[id]))
			}
		}
	}

	// The dead-letter topic: each rejected record and poison pill once,
	// byte for byte, with its stage.
	letters := readAll(t, c, dlq)
	seen := map[place]bool{}
	for _, r := range letters {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatalf("letter %d/%d: %v", r.Partition, r.Offset, err)
		}
		pl := place{l.OriginalPartition, l.OriginalOffset}
		if seen[pl] {
			t.Errorf("record %v dead-lettered twice", pl)
		}
		seen[pl] = true
		k, ok := wantDead[pl]
		if !ok {
			t.Errorf("record %v (%s) dead-lettered: %s", pl, kindOf[pl], l.Message)
			continue
		}
		wantStage := "process"
		if k == "poison" {
			wantStage = "deserialize-value"
		}
		if l.Stage != wantStage || l.Class != "permanent" {
			t.Errorf("record %v (%s): stage %s class %s, want %s permanent: %s", pl, k, l.Stage, l.Class, wantStage, l.Message)
		}
		if k == "permanent" && !strings.Contains(l.Message, "HTTP 422") {
			t.Errorf("record %v: message %q does not name the status", pl, l.Message)
		}
		if k == "verdict-permanent" && !strings.Contains(l.Message, "Antidote-Outcome: permanent") {
			t.Errorf("record %v: message %q does not name the verdict", pl, l.Message)
		}
	}
	if len(seen) != len(wantDead) {
		t.Errorf("%d records dead-lettered, want %d", len(seen), len(wantDead))
	}
	accounted := len(s.Accepted) + len(seen)
	t.Logf("produced %d = accepted %d + dead-lettered %d", n, len(s.Accepted), len(seen))
	if accounted != n {
		t.Fatalf("produced %d, accounted %d", n, accounted)
	}
	checkCommittedAtEnd(t, c, group, topic)
}

func gzipOf(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestIntegrationRunKafkaSink: three pipelines of one file read one topic.
// The cleaner forwards only the records that decompress and parse as JSON,
// decoded, to a clean topic (key, headers and timestamp as they were), and
// dead-letters the others; the mirror forwards every record as it is; the
// exact pipeline does what the cleaner does with exactly-once, and a
// read_committed reader sees each of its records once.
func TestIntegrationRunKafkaSink(t *testing.T) {
	c := kafkatest.New(t)
	raw := c.Topic(t, "run-raw", 2)
	clean := c.Topic(t, "run-clean", 2)
	mirror := c.Topic(t, "run-mirror", 2)
	exact := c.Topic(t, "run-exact", 2)
	cl := c.Client(t)
	const n = 60
	type sent struct {
		rec  *kgo.Record
		json []byte // the decoded value; nil for a poison pill
	}
	sentAt := map[place]sent{}
	ts := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range n {
		j := []byte(fmt.Sprintf(`{"event":%d}`, i))
		var v []byte
		switch i % 5 {
		case 3:
			v = gzipOf(t, []byte("not json at all")) // decompresses, is no JSON
			j = nil
		case 4:
			v = []byte("plain, not gzip") // does not decompress
			j = nil
		default:
			v = gzipOf(t, j)
		}
		r := &kgo.Record{Topic: raw, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: v, Timestamp: ts.Add(time.Duration(i) * time.Millisecond),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i), 0, 0xff}}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		sentAt[place{r.Partition, r.Offset}] = sent{r, j}
	}
	cleanGroup, mirrorGroup, exactGroup := kafkatest.UniqueName("cleaner"), kafkatest.UniqueName("mirror"), kafkatest.UniqueName("exact")
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
pipelines:
  - name: cleaner
    topics: [%s]
    group: %s
    value:
      stages: [{type: gzip}]
      format: json
    sink:
      kafka: {topic: %s, value: decoded}
  - name: mirror
    topics: [%s]
    group: %s
    value: {format: bytes}
    sink:
      kafka: {topic: %s}
  - name: exact
    topics: [%s]
    group: %s
    value:
      stages: [{type: gzip}]
      format: json
    dead-letter: {topic: %s.exact.dlq}
    sink:
      kafka: {topic: %s, value: decoded, exactly-once: {transactional-id: %s}}
`, strings.Join(c.Brokers(), ", "), raw, cleanGroup, clean, raw, mirrorGroup, mirror, raw, exactGroup, raw, exact, kafkatest.UniqueName("exact-txn")))
	wantClean := 0
	for _, s := range sentAt {
		if s.json != nil {
			wantClean++
		}
	}
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 120*time.Second, "the clean, mirror and dead-letter topics to fill", func() bool {
		return countTopic(t, adm, clean) >= int64(wantClean) && countTopic(t, adm, mirror) >= n && countTopic(t, adm, raw+".dlq") >= int64(n-wantClean) &&
			countTopic(t, adm, raw+".exact.dlq") >= int64(n-wantClean)
	}, logs.String)
	exactGot := readCommitted(t, c, exact, wantClean, logs.String)
	for _, g := range []string{cleanGroup, mirrorGroup, exactGroup} {
		waitCommittedAtEnd(t, c, g, logs.String, raw)
	}
	if code, out := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}

	byKeyValue := func(r *kgo.Record) string { return fmt.Sprintf("%x|%x|%x", r.Key, r.Value, r.Headers) }
	wantCleanSet, wantMirrorSet := map[string]*kgo.Record{}, map[string]*kgo.Record{}
	for _, s := range sentAt {
		wantMirrorSet[byKeyValue(s.rec)] = s.rec
		if s.json != nil {
			cp := *s.rec
			cp.Value = s.json
			wantCleanSet[byKeyValue(&cp)] = s.rec
		}
	}
	wantExactSet := map[string]*kgo.Record{}
	for k, v := range wantCleanSet {
		wantExactSet[k] = v
	}
	for name, tc := range map[string]struct {
		topic string
		want  map[string]*kgo.Record
	}{"clean": {clean, wantCleanSet}, "mirror": {mirror, wantMirrorSet}, "exact": {exact, wantExactSet}} {
		got := exactGot
		if name != "exact" {
			got = readAll(t, c, tc.topic)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d records, want %d", name, len(got), len(tc.want))
		}
		for _, r := range got {
			src, ok := tc.want[byKeyValue(r)]
			if !ok {
				t.Errorf("%s: unexpected record key %q value %q", name, r.Key, r.Value)
				continue
			}
			if !r.Timestamp.Equal(src.Timestamp) {
				t.Errorf("%s: timestamp %v, want the source's %v", name, r.Timestamp, src.Timestamp)
			}
			delete(tc.want, byKeyValue(r))
		}
	}
	letters := readAll(t, c, raw+".dlq")
	for _, r := range letters {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		s := sentAt[place{l.OriginalPartition, l.OriginalOffset}]
		if s.rec == nil || s.json != nil {
			t.Errorf("letter of %d/%d: want only poison pills", l.OriginalPartition, l.OriginalOffset)
			continue
		}
		if l.Stage != "deserialize-value" || !bytes.Equal(r.Value, s.rec.Value) || l.Group != cleanGroup {
			t.Errorf("letter of %d/%d: stage %s group %s value %q", l.OriginalPartition, l.OriginalOffset, l.Stage, l.Group, r.Value)
		}
	}
	if len(letters) != n-wantClean {
		t.Errorf("%d letters, want %d", len(letters), n-wantClean)
	}
	if got := readCommitted(t, c, raw+".exact.dlq", n-wantClean, logs.String); len(got) != n-wantClean {
		t.Errorf("%d letters of the exact pipeline, want %d", len(got), n-wantClean)
	}
}

// readCommitted reads topic with read_committed until it has want records,
// then a second more, so that a record written twice shows.
func readCommitted(t *testing.T, c *kafkatest.Cluster, topic string, want int, logs func() string) []*kgo.Record {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s with read_committed: %d of %d records\n%s", topic, len(out), want, logs())
		}
		out = append(out, fs.Records()...)
	}
	more, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	out = append(out, cl.PollFetches(more).Records()...)
	return out
}

// TestIntegrationRunFloodHint: when the flood guard trips, the log of
// antidote run says the command that lets the pipeline go on.
func TestIntegrationRunFloodHint(t *testing.T) {
	t.Setenv(admin.EnvToken, "flood-token")
	c := kafkatest.New(t)
	raw, out := c.Topic(t, "run-flood", 1), c.Topic(t, "run-flood-out", 1)
	var rs []*kgo.Record
	for range 5 {
		rs = append(rs, &kgo.Record{Topic: raw, Value: []byte("not json")})
	}
	kafkatest.Produce(t, c.Client(t), rs...)
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
admin: {address: "127.0.0.1:0"}
pipelines:
  - name: flooded
    topics: [%s]
    group: %s
    value: {format: json}
    flood-guard: {window: 10, min: 2, share: 0.1}
    sink:
      kafka: {topic: %s}
`, strings.Join(c.Brokers(), ", "), raw, kafkatest.UniqueName("flood"), out))
	_, logs := startRun(t, file)
	clitest.WaitFor(t, 60*time.Second, "the flood guard to trip", func() bool { return strings.Contains(logs.String(), "flood guard tripped: fetching is paused") }, logs.String)
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "flood guard tripped: fetching is paused") {
			if !regexp.MustCompile(`let it go on: antidote ctl --admin http://127\.0\.0\.1:[1-9]\d* --consumer flooded flood resume`).MatchString(line) || !strings.Contains(line, `"pipeline":"flooded"`) {
				t.Errorf("the flood guard's line does not say how to go on: %s", line)
			}
		}
	}
}

// TestIntegrationRunTokenFile: without a token, antidote run generates
// one and writes it to a file only its user reads; the log names the file
// and never holds the token.
func TestIntegrationRunTokenFile(t *testing.T) {
	t.Setenv(admin.EnvToken, "")
	c := kafkatest.New(t)
	raw, out := c.Topic(t, "run-token", 1), c.Topic(t, "run-token-out", 1)
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
admin: {address: "127.0.0.1:0"}
pipelines:
  - name: p
    topics: [%s]
    group: %s
    value: {format: bytes}
    sink:
      kafka: {topic: %s}
`, strings.Join(c.Brokers(), ", "), raw, kafkatest.UniqueName("token"), out))
	_, logs := startRun(t, file)
	var tokenFile, base string
	clitest.WaitFor(t, 60*time.Second, "the token file and the admin API in the logs", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				if f, ok := m["token_file"].(string); ok {
					tokenFile = f
				}
			}
		}
		base = adminFromLogs(logs.String())
		return tokenFile != "" && base != ""
	}, logs.String)
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, mode %v; want 0600", tokenFile, err, st.Mode())
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(tokenFile)) })
	b, _ := os.ReadFile(tokenFile)
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 || strings.Contains(logs.String(), tok) {
		t.Fatalf("token %q: too short, or in the logs", tok)
	}
	req, _ := http.NewRequest("GET", strings.TrimSuffix(base, "/")+"/stats", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /stats with the file's token: %d", resp.StatusCode)
	}
}

// TestIntegrationRunTopicPattern: a pipeline with topic-pattern reads the
// matching topics there are, and one created while it runs; a topic that
// does not match, and the pipeline's own dead-letter topic, are not read.
func TestIntegrationRunTopicPattern(t *testing.T) {
	c := kafkatest.New(t)
	prefix := kafkatest.UniqueName("pat")
	first := c.Topic(t, prefix+".orders", 1)
	other := c.Topic(t, kafkatest.UniqueName("other"), 1)
	out := c.Topic(t, kafkatest.UniqueName("pat-out"), 1)
	cl := c.Client(t)
	produce := func(topic string, vs ...string) {
		t.Helper()
		for _, v := range vs {
			kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(v)})
		}
	}
	produce(first, `{"n":1}`, "not json")
	produce(other, `{"n":99}`)
	group := kafkatest.UniqueName("pattern")
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
pipelines:
  - name: pattern
    topic-pattern: '%s\..*'
    topic-refresh: 1s
    group: %s
    value: {format: json}
    sink:
      kafka: {topic: %s}
`, strings.Join(c.Brokers(), ", "), regexp.QuoteMeta(prefix), group, out))
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 60*time.Second, "the first topic's record forwarded and its pill dead-lettered", func() bool {
		return countTopic(t, adm, out) >= 1 && countTopic(t, adm, first+".dlq") >= 1
	}, logs.String)
	second := c.Topic(t, prefix+".refunds", 1)
	produce(second, `{"n":2}`)
	clitest.WaitFor(t, 60*time.Second, "the record of the topic created while running", func() bool { return countTopic(t, adm, out) >= 2 }, logs.String)
	waitCommittedAtEnd(t, c, group, logs.String, first, second)
	if code, o := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, o)
	}
	var got []string
	for _, r := range readAll(t, c, out) {
		got = append(got, string(r.Value))
	}
	sort.Strings(got)
	if want := []string{`{"n":1}`, `{"n":2}`}; !slices.Equal(got, want) {
		t.Errorf("forwarded %q, want %q (nothing of %s, nothing read back from the dead-letter topic)", got, want, other)
	}
	if n := countTopic(t, adm, first+".dlq"); n != 1 {
		t.Errorf("%d letters, want the one pill once", n)
	}
	// The dead-letter topic matches the pattern, and is not read: the group
	// has no offsets on it, and no letter of a letter was written.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsetsForTopics(ctx, group, first+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			t.Errorf("the group committed %s/%d at %d: it read its own dead letters", o.Topic, o.Partition, o.At)
		}
	})
	if td, err := adm.ListTopics(ctx, first+".dlq.dlq"); err != nil || td.Has(first+".dlq.dlq") {
		t.Errorf("%s.dlq.dlq exists (%v): the dead letters were read back", first, err)
	}
}
