package group

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationGroupDescribe: a classic consumer group stopped on its
// record at offset 1 of 3: its type, state, committed offset and lag.
func TestIntegrationGroupDescribe(t *testing.T) {
	c := kafkatest.New(t)
	topic, group := stuckGroup(t, c)
	code, out, errOut := runCmd(t, "group", "describe", group, "-o", "json", "--brokers", strings.Join(c.Brokers(), ","))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var d Described
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if d.Type != "classic" || d.State != "Empty" || len(d.Members) != 0 || d.Share != nil || d.Lag != 2 ||
		len(d.Partitions) != 1 || fmt.Sprint(d.Partitions[0]) != fmt.Sprint(PartitionState{Topic: topic, Partition: 0, Offset: 1, End: 3, Lag: 2}) {
		t.Errorf("described %+v", d)
	}
	code, out, _ = runCmd(t, "group", "describe", group, "--brokers", strings.Join(c.Brokers(), ","))
	if code != 0 || !strings.Contains(out, "(classic group), state Empty, 0 member(s), lag 2") || !strings.Contains(out, "COMMITTED") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCmd(t, "group", "describe", "no-such-group-"+group, "--brokers", strings.Join(c.Brokers(), ",")); code != 1 || !strings.Contains(errOut, "no group") {
		t.Errorf("an unknown group: exit %d: %s", code, errOut)
	}
}

// TestIntegrationGroupDescribeShare: a share group with a running member
// that settled every record: its type, member and assignment, its
// share-partition lag 0 (on kfake the start offsets at the end), and its
// delivery limit.
// On a real broker, a broker dead-letter topic that does not exist is
// reported with what to change, and the exit code is 1.
func TestIntegrationGroupDescribeShare(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "describe-share", 2)
	group := kafkatest.UniqueName("describe-share-group")
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 6 {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("v")})
	}
	m, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), ClientOpts: append(c.ClientOpts(), kgo.ClientID("describe-member")), Topics: []string{topic}, ShareGroup: group,
		Share: consumer.Share{FromEarliest: true}, Value: serde.String(), Logger: kafkatest.Logger(t),
		Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	})
	brokers := strings.Join(c.Brokers(), ",")
	var d Described
	kafkatest.WaitFor(t, 30*time.Second, "the records settled and the start offsets at the end", func() bool {
		if m.Stats().Processed < 6 {
			return false
		}
		code, out, _ := runCmd(t, "group", "describe", group, "-o", "json", "--brokers", brokers)
		d = Described{}
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Partitions) != 2 {
			return false
		}
		// kfake moves the start offset at once; Kafka persists it
		// lazily, and answers the lag (KIP-1226) at once.
		for _, p := range d.Partitions {
			if p.Lag != 0 || !c.Real() && p.Offset != 3 {
				return false
			}
		}
		return true
	})
	if d.Type != "share" || d.State != "Stable" || len(d.Members) != 1 || d.Members[0].ClientID != "describe-member" ||
		strings.Join(d.Members[0].Assigned, " ") != topic+"/0 "+topic+"/1" || d.Lag != 0 {
		t.Errorf("described %+v", d)
	}
	for _, p := range d.Partitions {
		if p.End != 3 || p.Lag != 0 || p.Offset < 0 || p.Offset > 3 || len(p.Members) != 1 {
			t.Errorf("partition %+v: want a start offset, end 3, lag 0, one member", p)
		}
	}
	if d.Share == nil || d.Share.DeliveryLimit != 5 || d.Share.LimitSource == "" || len(d.Share.Problems) != 0 {
		t.Errorf("share setup %+v: want the limit 5 and no problem", d.Share)
	}
	code, out, _ := runCmd(t, "group", "describe", group, "--brokers", brokers)
	if code != 0 || !strings.Contains(out, "(share group), state Stable, 1 member(s), lag 0") || !strings.Contains(out, "START-OFFSET") ||
		!strings.Contains(out, "delivery limit: 5 (") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if !c.Real() {
		return // kfake has no broker dead-letter topics
	}
	setGroupConfig(t, c, group, "errors.deadletterqueue.topic.name", "dlq."+group)
	code, out, errOut := runCmd(t, "group", "describe", group, "--brokers", brokers)
	if code != 1 || !strings.Contains(out, "PROBLEM: the broker's dead-letter topic dlq."+group+" (errors.deadletterqueue.topic.name) does not exist") ||
		!strings.Contains(out, "create it with errors.deadletterqueue.group.enable=true") || !strings.Contains(errOut, "problem(s) in its setup") {
		t.Errorf("a broken dead-letter setup: exit %d\n%s\n%s", code, out, errOut)
	}
}

// setGroupConfig sets a config of a group.
func setGroupConfig(t *testing.T, c *kafkatest.Cluster, group, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("setting %s=%s on group %s: error code %d", key, value, group, r.ErrorCode)
		}
	}
}

// TestIntegrationGroupDescribeConsumerProtocol: a KIP-848 consumer group
// (type consumer) with a running member: its member, its assignment (on a
// real broker: kfake names the topics by their ids alone), and its
// committed offsets at the end.
func TestIntegrationGroupDescribeConsumerProtocol(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "describe-848", 2)
	group := kafkatest.UniqueName("describe-848-group")
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 4 {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte("v")})
	}
	m, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), ClientOpts: append(c.ClientOpts(), kgo.ClientID("describe-848-member"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
		Topics: []string{topic}, Group: group, GroupProtocol: consumer.GroupConsumer, CommitInterval: 100 * time.Millisecond,
		Value: serde.String(), Logger: kafkatest.Logger(t),
		Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	})
	var d Described
	kafkatest.WaitFor(t, 30*time.Second, "the offsets committed at the end", func() bool {
		code, out, _ := runCmd(t, "group", "describe", group, "-o", "json", "--brokers", strings.Join(c.Brokers(), ","))
		d = Described{}
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Partitions) != 2 || len(d.Members) != 1 {
			return false
		}
		for _, p := range d.Partitions {
			if p.Offset != 2 {
				return false
			}
		}
		return true
	})
	// kfake names the member's assigned topics by their ids alone.
	if d.Type != "consumer" || d.Members[0].ClientID != "describe-848-member" || c.Real() && len(d.Members[0].Assigned) != 2 || d.Lag != 0 || d.Share != nil {
		t.Errorf("described %+v", d)
	}
}
