package run

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationSearchSink: antidote run indexes a topic into a real
// OpenSearch whose index has a strict mapping. Inside the same bulk
// requests, the documents the mapping rejects (a field it does not know, a
// value of the wrong type) are dead-lettered with the item's error type and
// reason, the records that are no JSON are dead-lettered when decoded, and
// every good record is exactly one document, under its deterministic id. A
// second group reading the topic again overwrites the documents instead of
// duplicating them.
func TestIntegrationSearchSink(t *testing.T) {
	base := openSearch(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "search-sink", 3)
	index := "it-" + strings.ToLower(topic)
	createIndex(t, base, index, `{"dynamic":"strict","properties":{"n":{"type":"long"},"name":{"type":"keyword"}}}`)

	const n = 150
	kinds := map[place]string{} // good, unknown-field, wrong-type, not-json
	var recs []*kgo.Record
	for i := range n {
		var v string
		switch i % 10 {
		case 3:
			v = fmt.Sprintf(`{"n":%d,"name":"r%d","surprise":true}`, i, i)
		case 6:
			v = fmt.Sprintf(`{"n":"not a number %d"}`, i)
		case 9:
			v = "not json"
		default:
			v = fmt.Sprintf(`{"n":%d,"name":"r%d"}`, i, i)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
	}
	recs = kafkatest.Produce(t, c.Client(t), recs...)
	good := map[string]bool{}
	for _, r := range recs {
		v, k := string(r.Value), "good"
		switch {
		case strings.Contains(v, "surprise"):
			k = "unknown-field"
		case strings.Contains(v, "not a number"):
			k = "wrong-type"
		case v == "not json":
			k = "not-json"
		default:
			good[fmt.Sprintf("%s-%d-%d", topic, r.Partition, r.Offset)] = true
		}
		kinds[place{r.Partition, r.Offset}] = k
	}
	bad := n - len(good)

	run := func(group string) {
		file := clitest.WriteFile(t, "search.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
pipelines:
  - name: search
    topics: [%s]
    group: %s
    value: {format: json}
    sink:
      opensearch:
        urls: [%s]
        index: it-{topic}
        batch: {size: 20, linger: 20ms}
`, strings.Join(c.Brokers(), ", "), topic, group, base))
		stop, logs := startRun(t, file)
		adm := kadm.NewClient(c.Client(t))
		letters := countTopic(t, adm, topic+".dlq")
		clitest.WaitFor(t, 120*time.Second, "the documents and the letters", func() bool {
			return docCount(t, base, index) >= len(good) && countTopic(t, adm, topic+".dlq") >= letters+int64(bad)
		}, logs.String)
		waitCommittedAtEnd(t, c, group, logs.String, topic)
		if code, out := stop(); code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
	}
	check := func(round int) {
		ids, total := docIDs(t, base, index)
		if total != len(good) || len(ids) != len(good) {
			t.Errorf("round %d: %d documents (%d ids), want %d", round, total, len(ids), len(good))
		}
		for id, k := range ids {
			if !good[id] || k != 1 {
				t.Errorf("round %d: document %s seen %d times; a good record's id: %v", round, id, k, good[id])
			}
		}
		letters := readAll(t, c, topic+".dlq")
		if len(letters) != round*bad {
			t.Errorf("round %d: %d letters, want %d", round, len(letters), round*bad)
		}
		for _, r := range letters {
			l, err := deadletter.ParseRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			var stage, want string
			switch k := kinds[place{l.OriginalPartition, l.OriginalOffset}]; k {
			case "unknown-field":
				stage, want = "process", "400 strict_dynamic_mapping_exception: mapping set to strict, dynamic introduction of [surprise]"
			case "wrong-type":
				stage, want = "process", "400 mapper_parsing_exception: failed to parse field [n] of type [long]"
			case "not-json":
				stage, want = "deserialize-value", "json"
			default:
				t.Errorf("letter of %d/%d, a %s record", l.OriginalPartition, l.OriginalOffset, k)
				continue
			}
			if l.Stage != stage || l.Class != "permanent" || !strings.Contains(l.Message, want) {
				t.Errorf("letter of %d/%d: stage %s class %s message %q; want %s, permanent, %q", l.OriginalPartition, l.OriginalOffset, l.Stage, l.Class, l.Message, stage, want)
			}
		}
	}
	run(kafkatest.UniqueName("search"))
	check(1)
	run(kafkatest.UniqueName("search-again"))
	check(2)
}
