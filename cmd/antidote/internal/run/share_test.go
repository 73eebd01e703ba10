package run

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// shareYAML is a valid share-group pipeline.
const shareYAML = `kafka:
  brokers: [127.0.0.1:9092]
pipelines:
  - name: workers
    topics: [jobs]
    group: workers
    group-type: share
    share: {delivery-limit: 4, from-earliest: true, max-records: 50}
    value:
      format: json
    sink:
      http:
        url: http://127.0.0.1:8080/jobs
`

// TestRunConfigShare: group-type: share maps onto Config.ShareGroup and
// Config.Share; what a share group cannot do is refused with why, a batch
// sink among them.
func TestRunConfigShare(t *testing.T) {
	plan, err := parseRunFile("f.yaml", []byte(shareYAML), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pp := plan.pipelines[0]
	if pp.share == nil || *pp.share != (consumer.Share{DeliveryLimit: 4, FromEarliest: true, MaxRecords: 50}) {
		t.Fatalf("share %+v, want the share block", pp.share)
	}
	if d := strings.Join(pp.describe(), "\n"); !strings.Contains(d, "share group workers (delivery limit 4; from the earliest; at most 50 records a poll)") {
		t.Errorf("--check says\n%s", d)
	}
	plain := strings.Replace(shareYAML, "    share: {delivery-limit: 4, from-earliest: true, max-records: 50}\n", "", 1)
	if plan, err := parseRunFile("f.yaml", []byte(plain), nil, nil); err != nil || *plan.pipelines[0].share != (consumer.Share{}) ||
		!strings.Contains(strings.Join(plan.pipelines[0].describe(), "\n"), "delivery limit read from the cluster; new records; at most 500") {
		t.Errorf("without a share block: %v", err)
	}
	search := strings.Replace(shareYAML, "      http:\n        url: http://127.0.0.1:8080/jobs\n", "      opensearch:\n        urls: [http://127.0.0.1:9200]\n        index: jobs\n", 1)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"batch sink", search, "f.yaml:12: pipelines[0].sink.opensearch: not with group-type: share: the opensearch sink writes a partition's records in batches"},
		{"elasticsearch", strings.Replace(search, "opensearch:", "elasticsearch:", 1), "pipelines[0].sink.elasticsearch: not with group-type: share"},
		{"http batch", shareYAML + "        batch: {size: 10}\n", "pipelines[0].sink.http.batch: not with group-type: share"},
		{"topic pattern", strings.Replace(shareYAML, "    topics: [jobs]\n", "    topic-pattern: jobs.*\n", 1), "pipelines[0].topic-pattern: not with group-type: share"},
		{"type typo", strings.Replace(shareYAML, "group-type: share", "group-type: shared", 1), `f.yaml:7: pipelines[0].group-type: "shared" is not one of consumer, share (did you mean share?)`},
		{"share without type", strings.Replace(shareYAML, "    group-type: share\n", "", 1), "pipelines[0].share: the settings of a share group's member: set group-type: share"},
		{"protocol", shareYAML + "    group-protocol: consumer\n", "pipelines[0].group-protocol: not with group-type: share"},
		{"retry topics", shareYAML + "    policy:\n      process:\n        transient: {then: retry-topics}\n    retry-topics: {tiers: [1s]}\n", "pipelines[0].retry-topics: not with group-type: share: the group delivers a released record again itself"},
		{"attempts topic", shareYAML + "    durable-attempts: {topic: attempts}\n", "pipelines[0].durable-attempts.topic: not with group-type: share"},
		{"flood guard", shareYAML + "    flood-guard: {share: 0.5}\n", "pipelines[0].flood-guard: not with group-type: share"},
		{"commit interval", shareYAML + "    commit-interval: 1s\n", "pipelines[0].commit-interval: not with group-type: share"},
		{"buffer", shareYAML + "    buffer: {total-records: 10}\n", "pipelines[0].buffer: not with group-type: share: a member holds one poll at a time"},
		{"limit 1", strings.Replace(shareYAML, "delivery-limit: 4", "delivery-limit: 1", 1), "pipelines[0].share.delivery-limit: 1: Kafka's lowest is 2"},
		{"negative max", strings.Replace(shareYAML, "max-records: 50", "max-records: -1", 1), "pipelines[0].share.max-records: negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
	// --check says it too, with the exit code of a bad file.
	file := clitest.WriteFile(t, "run.yaml", search)
	code, _, stderr := runCmd(t, "run", "-c", file, "--check")
	if code == 0 || !strings.Contains(stderr, "not with group-type: share: the opensearch sink") {
		t.Errorf("run --check of a share group with a batch sink: exit %d\n%s", code, stderr)
	}
}

// TestIntegrationRunShareGroup: antidote run as a member of a share group,
// forwarding JSON records to a topic: every good record is forwarded, each
// poison pill dead-lettered once with its delivery count.
func TestIntegrationRunShareGroup(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	src := c.Topic(t, "run-share", 3)
	out := c.Topic(t, "run-share-out", 3)
	cl := c.Client(t)
	const n = 90
	good := 0
	for i := range n {
		v := []byte(fmt.Sprintf(`{"job":%d}`, i))
		if i%9 == 4 {
			v = []byte("not json")
		} else {
			good++
		}
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: src, Key: []byte(fmt.Sprint(i)), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	group := kafkatest.UniqueName("run-share-group")
	file := clitest.WriteFile(t, "run.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
pipelines:
  - name: workers
    topics: [%s]
    group: %s
    group-type: share
    share: {from-earliest: true, max-records: 20}
    concurrency: {max: 4}
    value: {format: json}
    sink:
      kafka: {topic: %s, value: decoded}
`, strings.Join(c.Brokers(), ", "), src, group, out))
	stop, logs := startRun(t, file)
	adm := kadm.NewClient(c.Client(t))
	clitest.WaitFor(t, 120*time.Second, "the forwarded and dead-letter topics to fill", func() bool {
		return countTopic(t, adm, out) >= int64(good) && countTopic(t, adm, src+".dlq") >= int64(n-good)
	}, logs.String)
	if code, log := stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, log)
	}
	seen := map[string]int{}
	for _, r := range readAll(t, c, out) {
		seen[string(r.Key)]++
	}
	letters := map[string]int{}
	for _, r := range readAll(t, c, src+".dlq") {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		letters[string(r.Key)]++
		if l.Group != group || l.Stage != string(deadletter.StageDeserializeValue) {
			t.Errorf("letter of %s: group %s stage %s", r.Key, l.Group, l.Stage)
		}
		count := ""
		for _, h := range r.Headers {
			if h.Key == consumer.HeaderDeliveryCount {
				count = string(h.Value)
			}
		}
		if count != "1" {
			t.Errorf("letter of %s: delivery count %q, want 1", r.Key, count)
		}
	}
	for i := range n {
		k := fmt.Sprint(i)
		switch {
		case i%9 == 4 && (letters[k] != 1 || seen[k] != 0):
			t.Errorf("poison pill %s: %d letters, forwarded %d times; want 1, 0", k, letters[k], seen[k])
		case i%9 != 4 && (seen[k] != 1 || letters[k] != 0):
			t.Errorf("record %s: forwarded %d times, %d letters; want 1, 0", k, seen[k], letters[k])
		}
	}
}
