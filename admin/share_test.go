package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationAdminShareGroup: the admin API over a share-group member:
// /stats shows its group and the two records it retries in place, /readyz
// says ready, POST .../skip ends one, POST /retry?enabled=off (the kill
// switch) sends the other to its dead letter at once, and pause, which has
// no partition to act on in a share group, is refused with why.
func TestIntegrationAdminShareGroup(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "admin-share", 2)
	pcl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	kafkatest.Produce(t, pcl,
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte("poison")},
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("poison")},
	)
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), ClientOpts: c.ClientOpts(), Topics: []string{topic}, ShareGroup: kafkatest.UniqueName("admin-share-group"),
		Share: consumer.Share{FromEarliest: true},
		Value: serde.String(),
		Handler: func(context.Context, *consumer.Record[string, string]) error {
			return failure.Transient(errors.New("inventory database down"))
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.Fixed(time.Hour)},
		}},
		Concurrency: consumer.Concurrency{Max: 2},
		Logger:      kafkatest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- cons.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	})
	h, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"jobs": cons}, Token: testToken, Logger: kafkatest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, h)
	// The records come in one poll or two (a broker may return one
	// partition's records a poll).
	kafkatest.WaitFor(t, 30*time.Second, "a record retrying in place", func() bool { return len(cons.Stats().Stuck) > 0 })

	code, body := call(t, "GET", base+"/stats", testToken)
	st, _ := body["consumers"].(map[string]any)["jobs"].(map[string]any)
	sg, _ := st["ShareGroup"].(map[string]any)
	if code != 200 || sg == nil || sg["DeliveryLimit"] != float64(5) || sg["Acquired"] == float64(0) || sg["Held"] == float64(0) {
		t.Fatalf("GET /stats: %d, ShareGroup %v; want the group, its limit 5, records acquired and held", code, sg)
	}
	stuck, _ := st["Stuck"].([]any)
	if len(stuck) == 0 {
		t.Fatalf("GET /stats: Stuck %v, want the records retried", st["Stuck"])
	}
	first := stuck[0].(map[string]any)
	part, off := fmt.Sprint(first["Partition"]), int64(first["Offset"].(float64))
	if code, body := call(t, "GET", base+"/readyz", testToken); code != 200 {
		t.Errorf("GET /readyz: %d %v, want ready", code, body)
	}
	if code, body := call(t, "POST", base+"/partitions/"+topic+"/"+part+"/pause", testToken); code != 404 || !strings.Contains(body["error"].(string), "owns none") {
		t.Errorf("POST pause: %d %v; want 404, the member owns no partition", code, body)
	}
	if code, body := call(t, "POST", fmt.Sprintf("%s/partitions/%s/%s/skip?offset=%d", base, topic, part, off+1), testToken); code != 409 {
		t.Errorf("POST skip of another offset: %d %v, want 409", code, body)
	}
	if code, body := call(t, "POST", fmt.Sprintf("%s/partitions/%s/%s/skip?offset=%d", base, topic, part, off), testToken); code != 200 || body["action"] != "skipped" {
		t.Fatalf("POST skip: %d %v", code, body)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the skip and the other record retrying", func() bool {
		s := cons.Stats()
		return s.Skipped == 1 && len(s.Stuck) == 1
	})
	if code, body := call(t, "POST", base+"/retry?enabled=off", testToken); code != 200 || body["retry_enabled"] != false {
		t.Fatalf("POST /retry?enabled=off: %d %v", code, body)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the kill switch's dead letter", func() bool { return cons.Stats().DeadLettered == 1 })
	_, body = call(t, "GET", base+"/stats", testToken)
	st = body["consumers"].(map[string]any)["jobs"].(map[string]any)
	sg = st["ShareGroup"].(map[string]any)
	if sg["Accepted"] != float64(2) || sg["Held"] != float64(0) || st["RetryEnabled"] != false {
		t.Errorf("after: ShareGroup %v, RetryEnabled %v; want 2 accepted, none held, retrying off", sg, st["RetryEnabled"])
	}
}
