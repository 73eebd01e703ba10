package run

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/pills"
	"github.com/antidote-kafka/antidote/internal/srtest"
)

// eventV2 is events.avsc with a field more, as a service that moved on
// writes it: the reader schema resolves it by dropping the field.
const eventV2 = `{"type": "record", "name": "Event", "namespace": "shop", "fields": [
  {"name": "id", "type": "string"},
  {"name": "type", "type": "string"},
  {"name": "occurred_at", "type": "string"},
  {"name": "customer", "type": "string"},
  {"name": "amount_cents", "type": "long"},
  {"name": "attributes", "type": {"type": "map", "values": "string"}, "default": {}},
  {"name": "source", "type": ["null", "string"], "default": null}
]}`

// eventMapping is a strict mapping of the events: a field it does not know
// and a date that is no date are refused.
const eventMapping = `{"dynamic": "strict", "properties": {
  "id": {"type": "keyword"}, "type": {"type": "keyword"},
  "occurred_at": {"type": "date", "format": "strict_date_time"},
  "customer": {"type": "keyword"}, "amount_cents": {"type": "long"},
  "attributes": {"type": "object", "dynamic": "strict", "properties": {"channel": {"type": "keyword"}}}}}`

// TestIntegrationSearchSeedSystem is the first seed's system, run from
// examples/search-engine.yaml: thirty topics of Avro written by Python's
// confluent-kafka AvroSerializer through the schema registry, indexed into
// OpenSearch by antidote run. Mid-way the registry is killed for 10 s while
// records of a new schema version arrive, then OpenSearch is stopped
// (SIGSTOP) for 10 s while more arrive: those records wait, none is
// dead-lettered. Poison pills of every kind, and documents the index's
// strict mapping refuses, are dead-lettered with the reason. At the end
// every good record is exactly one document (counted by id) and every pill
// and refused document exactly one letter.
func TestIntegrationSearchSeedSystem(t *testing.T) {
	base := openSearch(t)
	py := srtest.Python(t)
	osPid := openSearchPid(t, base)
	reg := srtest.New(t)
	if reg.Real() {
		reg.RequireKill(t)
	}
	c := kafkatest.New(t)
	ctx := context.Background()

	// The example, on this test's servers, topics and group.
	example, err := os.ReadFile("../../examples/search-engine.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prefix := kafkatest.UniqueName("seed")
	m := regexp.MustCompile(`(?s)topics: \[(.*?)\]`).FindSubmatch(example)
	if m == nil {
		t.Fatal("no topics in the example")
	}
	var topics []string
	for _, s := range strings.Split(string(m[1]), ",") {
		topics = append(topics, prefix+"."+strings.TrimPrefix(strings.TrimSpace(s), "shop."))
	}
	if len(topics) != 30 {
		t.Fatalf("%d topics in the example, want 30", len(topics))
	}
	schema, err := filepath.Abs("../../examples/events.avsc")
	if err != nil {
		t.Fatal(err)
	}
	group := kafkatest.UniqueName("search-indexer")
	file := strings.NewReplacer(
		"[127.0.0.1:9092]", "["+strings.Join(c.Brokers(), ", ")+"]",
		"http://127.0.0.1:8081", reg.URL(),
		"http://127.0.0.1:9200", base,
		"schema-file: events.avsc", "schema-file: "+schema,
		"group: search-indexer", "group: "+group,
		"shop.", prefix+".",
	).Replace(string(example))
	path := clitest.WriteFile(t, "search-engine.yaml", file)

	adm := kadm.NewClient(c.Client(t))
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopics(cctx, 2, 1, nil, topics...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		all := append([]string(nil), topics...)
		for _, tp := range topics {
			all = append(all, tp+".dlq")
		}
		_, _ = adm.DeleteTopics(ctx, all...)
	})
	pattern := "events-" + prefix + ".*"
	if st, b := osDo(t, base, "PUT", "/_index_template/"+prefix, `{"index_patterns": ["`+pattern+`"], "template": {"settings": {"number_of_shards": 1, "number_of_replicas": 0}, "mappings": `+eventMapping+`}}`); st != 200 {
		t.Fatalf("index template: %d %s", st, b)
	}
	t.Cleanup(func() {
		osDo(t, base, "DELETE", "/"+pattern, "")
		osDo(t, base, "DELETE", "/_index_template/"+prefix, "")
	})

	// What is written, by place: offsets are counted here, since only
	// this test writes to its topics.
	type tp struct {
		topic string
		p     int32
	}
	next := map[tp]int64{}
	good := map[string]bool{}      // ids of the documents that must exist
	letters := map[string]string{} // place "topic/p/o" → what the letter's message must hold
	producer := reg.NewProducer(t, py, c.Brokers(), "")
	produce := func(phase string, schema string, perTopic int) {
		for ti, topic := range topics {
			for p := range int32(2) {
				var recs []any
				for k := range perTopic / 2 {
					i := int(p)*perTopic/2 + k
					ev := map[string]any{
						"id": fmt.Sprintf("%s-%d-%d", phase, ti, i), "type": "created",
						"occurred_at": "2026-12-02T10:00:00.000Z", "customer": fmt.Sprintf("c%d", i),
						"amount_cents": int64(100 * i), "attributes": map[string]any{"channel": "web"},
					}
					if schema == eventV2 {
						ev["source"] = "checkout-v2"
					}
					place := fmt.Sprintf("%s/%d/%d", topic, p, next[tp{topic, p}])
					next[tp{topic, p}]++
					switch {
					case phase == "one" && i == 1:
						ev["attributes"] = map[string]any{"channel": "web", "surprise": "x"}
						letters[place] = "400 strict_dynamic_mapping_exception: mapping set to strict, dynamic introduction of [surprise]"
					case phase == "one" && i == 2:
						ev["occurred_at"] = "yesterday"
						letters[place] = "400 mapper_parsing_exception: failed to parse field [occurred_at] of type [date]"
					default:
						good[strings.ReplaceAll(place, "/", "-")] = true
					}
					recs = append(recs, ev)
				}
				producer.Produce(t, srtest.Batch{Format: "avro", Schema: schema, Topic: topic, Partition: p, Records: recs})
			}
		}
	}
	docs := func() int { return docCount(t, base, pattern) }
	dlqs := make([]string, len(topics))
	for i, tp := range topics {
		dlqs[i] = tp + ".dlq"
	}
	lettersWritten := func() int64 {
		n := int64(0)
		for _, d := range dlqs {
			n += countTopic(t, adm, d)
		}
		return n
	}

	// Phase one: eight records a topic, two of which the mapping refuses,
	// and a poison pill of every kind.
	produce("one", eventsSchema(t), 8)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, k := range pills.Kinds() {
		topic := topics[(i*7)%len(topics)]
		r := &kgo.Record{Topic: topic, Partition: 1, Key: []byte(k.Name), Value: k.Value(i, 1000),
			Headers: []kgo.RecordHeader{{Key: pills.Header, Value: []byte(k.Name)}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		place := fmt.Sprintf("%s/1/%d", topic, next[tp{topic, 1}])
		next[tp{topic, 1}]++
		if r.Offset != next[tp{topic, 1}]-1 {
			t.Fatalf("pill %s at offset %d, counted %s", k.Name, r.Offset, place)
		}
		letters[place] = "pill:" + k.Name
	}
	stop, logs := startRun(t, path)
	waitAll := func(what string) {
		t.Helper()
		clitest.WaitFor(t, 3*time.Minute, what, func() bool {
			return docs() >= len(good) && lettersWritten() >= int64(len(letters))
		}, logs.String)
	}
	waitAll("phase one indexed and dead-lettered")

	// Phase two: the services move to a new schema version (registered
	// first, as a deploy does), then the registry dies for 10 s while
	// they write with it: antidote run has never seen the new id.
	for _, topic := range topics {
		producer.Produce(t, srtest.Batch{Format: "avro", Schema: eventV2, Topic: topic, Records: []any{map[string]any{
			"id": "x", "type": "x", "occurred_at": "x", "customer": "x", "amount_cents": 0, "attributes": map[string]any{}, "source": nil}}, RegisterOnly: true})
	}
	reg.Kill(t)
	produce("two", eventV2, 4)
	t.Logf("registry down: %d of %d documents", docs(), len(good))
	time.Sleep(10 * time.Second) // the outage
	t.Logf("registry down for 10s: %d of %d documents, %d letters", docs(), len(good), lettersWritten())
	reg.Revive(t)
	waitAll("phase two indexed after the registry came back")

	// Phase three: OpenSearch stops answering for 10 s (SIGSTOP) while
	// records arrive.
	if err := syscall.Kill(osPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(osPid, syscall.SIGCONT) })
	produce("three", eventsSchema(t), 4)
	time.Sleep(10 * time.Second) // the outage
	if err := syscall.Kill(osPid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("OpenSearch back after 10s stopped: %d letters", lettersWritten())
	waitAll("phase three indexed after OpenSearch came back")
	waitCommittedAtEnd(t, c, group, logs.String, topics...)
	if code, out := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}

	// Every good record is one document, under its id.
	ids, total := docIDs(t, base, pattern)
	if total != len(good) || len(ids) != len(good) {
		t.Errorf("%d documents (%d ids), want %d", total, len(ids), len(good))
	}
	for id, k := range ids {
		if !good[id] || k != 1 {
			t.Errorf("document %s seen %d times (a good record's id: %v)", id, k, good[id])
		}
	}
	// Every pill and refused document is one letter, with its reason.
	seen := map[string]bool{}
	for _, d := range dlqs {
		for _, r := range readAll(t, c, d) {
			l, err := deadletter.ParseRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			place := fmt.Sprintf("%s/%d/%d", l.OriginalTopic, l.OriginalPartition, l.OriginalOffset)
			want, ok := letters[place]
			switch {
			case !ok:
				t.Errorf("letter of %s, a good record: %s %s %s", place, l.Stage, l.Class, l.Message)
			case seen[place]:
				t.Errorf("letter of %s twice", place)
			case strings.HasPrefix(want, "pill:"):
				if l.Stage != "deserialize-value" || l.Class != "permanent" || l.Message == "" {
					t.Errorf("letter of the %s pill at %s: %s %s %q", want, place, l.Stage, l.Class, l.Message)
				}
			case l.Stage != "process" || l.Class != "permanent" || !strings.Contains(l.Message, want):
				t.Errorf("letter of %s: %s %s %q, want process, permanent, %q", place, l.Stage, l.Class, l.Message, want)
			}
			seen[place] = true
		}
	}
	if len(seen) != len(letters) {
		t.Errorf("%d letters, want %d (%d pills and %d refused documents)", len(seen), len(letters), len(pills.Kinds()), len(letters)-len(pills.Kinds()))
	}
	t.Logf("%d topics: %d documents, %d letters", len(topics), len(ids), len(seen))
}

// eventsSchema is the example's reader schema, which the services write with.
func eventsSchema(t *testing.T) string {
	b, err := os.ReadFile("../../examples/events.avsc")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openSearchPid is the process id of the node at base, which
// scripts/opensearch.sh started (it skips t otherwise, or fails it with
// CI=true).
func openSearchPid(t *testing.T, base string) int {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("CI") == "true" {
		fail = t.Fatalf
	}
	u, err := url.Parse(base)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "" {
		fail("OpenSearch %s is not one scripts/opensearch.sh started on loopback", base)
	}
	root, _ := filepath.Abs("../../../..")
	cmd := exec.Command(filepath.Join(root, "scripts", "opensearch.sh"), "pid")
	cmd.Env = append(os.Environ(), "OPENSEARCH_PORT="+u.Port())
	out, err := cmd.Output()
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil || pid <= 0 {
		fail("scripts/opensearch.sh pid: %v %v", err, perr)
	}
	return pid
}
