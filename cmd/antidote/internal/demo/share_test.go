package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// checkShareSummary checks the accounting of demo --share -o json: every
// job processed or dead-lettered once, each kind where it belongs, the
// jobs that never succeed dead-lettered on the group's last delivery, and
// the worker that left. On kfake every job's first delivery is seen; on a
// real broker the client may drop a fetch it acquired (its share session
// reset while the fetch was in flight, as a rebalance can do): the broker
// counts that delivery, so the jobs of that fetch are first seen on their
// second.
func checkShareSummary(t *testing.T, code int, stdout, stderr string, everyFirstSeen bool) shareSummary {
	t.Helper()
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s shareSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if s.Produced != 1000 || s.Lost != 0 || s.Duplicates != 0 || s.Processed+s.DeadLettered != s.Produced {
		t.Errorf("produced %d, processed %d, dead-lettered %d, lost %d, duplicates %d", s.Produced, s.Processed, s.DeadLettered, s.Lost, s.Duplicates)
	}
	for _, row := range s.ByKind {
		good := row.Kind == shareOK || row.Kind == shareOnce
		if good && (row.Processed != row.Produced || row.DeadLettered != 0) || !good && (row.DeadLettered != row.Produced || row.Processed != 0) {
			t.Errorf("kind %+v", row)
		}
		if row.Kind == shareNever && row.LetterDelivery[itoa(s.DeliveryLimit)] != row.Produced {
			t.Errorf("jobs that never succeed: letters by delivery count %v, want all on the limit %d", row.LetterDelivery, s.DeliveryLimit)
		}
	}
	var acquired uint64
	for _, n := range s.Deliveries {
		acquired += n
	}
	first := s.Deliveries[1]
	if s.DeliveryLimit != 5 || s.Released == 0 || first > uint64(s.Produced) || everyFirstSeen && first != uint64(s.Produced) ||
		first == 0 || acquired < uint64(s.Produced) || s.Deliveries[int32(s.DeliveryLimit)] == 0 {
		t.Errorf("delivery limit %d, released %d, deliveries %v", s.DeliveryLimit, s.Released, s.Deliveries)
	}
	if s.WorkerLeft != 0 {
		t.Errorf("worker left %d, want worker 0 to have left midway", s.WorkerLeft)
	}
	busy := 0
	for _, n := range s.ByWorker {
		if n > 0 {
			busy++
		}
	}
	if busy < 3 {
		t.Errorf("jobs by worker %v: want them spread over more workers than partitions", s.ByWorker)
	}
	return s
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestDemoShare: demo --share on the in-process cluster.
func TestDemoShare(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, "demo", "--share", "--records", "1000", "-o", "json")
	s := checkShareSummary(t, code, stdout, stderr, true)
	if s.Cluster != "kfake" || s.Topic != "jobs" || s.DLQTopic != "jobs.dlq" {
		t.Errorf("cluster %s, topic %s, dlq %s", s.Cluster, s.Topic, s.DLQTopic)
	}
	code, stdout, stderr = runCmd(t, "demo", "--share", "--records", "1000")
	if code != cli.ExitOK || !strings.Contains(stdout, "produced 1000 = processed") || !strings.Contains(stdout, "lost 0") ||
		!strings.Contains(stdout, "worker 0 left holding") {
		t.Errorf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "demo", "--share", "--format", "avro"); code != cli.ExitUsage || !strings.Contains(stderr, "--format does not apply with --share") {
		t.Errorf("--share --format avro: exit %d: %s", code, stderr)
	}
}

// TestIntegrationDemoShare: demo --share on the test cluster through
// --brokers.
func TestIntegrationDemoShare(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	code, stdout, stderr := runCmd(t, "demo", "--share", "--records", "1000", "-o", "json", "--brokers", strings.Join(c.Brokers(), ","))
	s := checkShareSummary(t, code, stdout, stderr, false)
	if s.Cluster != "kafka" || !strings.HasPrefix(s.Topic, "jobs-") {
		t.Errorf("cluster %s, topic %s", s.Cluster, s.Topic)
	}
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, s.Topic, s.DLQTopic); err != nil {
		t.Logf("deleting the demo's topics: %v", err)
	}
}
