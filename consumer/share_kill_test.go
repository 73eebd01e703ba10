package consumer_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// envShareWorker makes TestShareWorker run: a member that works like any
// other and writes the id of each record it processed to its log file.
const envShareWorker = "ANTIDOTE_SHARE_WORKER"

// TestShareWorker is a member TestIntegrationShareKillMidway kills; it
// skips itself unless started by it.
func TestShareWorker(t *testing.T) {
	if os.Getenv(envShareWorker) != "1" {
		t.Skip("run by TestIntegrationShareKillMidway")
	}
	c := kafkatest.New(t)
	f, err := os.OpenFile(os.Getenv(envShareLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	m, err := consumer.New(shareConfig(c, t, os.Getenv(envShareTopic), os.Getenv(envShareGroup), func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
		time.Sleep(5 * time.Millisecond) // mid-way is mid-work
		if err := shareHandler(ctx, r); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintln(f, r.Value.ID) // written before the ACCEPT: a kill may repeat it, never lose it
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationShareKillMidway (Kafka 4.4, with the group's broker
// dead-letter topic): 600 records over two worker processes and two members
// in this process; each worker is killed with SIGKILL mid-way, holding
// records it is working on. Nothing is lost: each good record is processed
// (at least once: a worker may die between its work and its ACCEPT), each
// failed record is dead-lettered, by Antidote, or by the broker when a
// worker dies holding it on its last delivery (the broker then archives
// it: without its dead-letter topic it would be gone); no letter is
// written twice for one delivery, and no good record is dead-lettered by
// Antidote. A worker killed after a letter was acknowledged and before its
// ACCEPT reached the broker leaves a record that is delivered again and
// dead-lettered again, on a later delivery: the letters' delivery counts
// tell the two apart (the log line counts them).
func TestIntegrationShareKillMidway(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	if !c.Real() {
		t.Skip("a real broker's dead-letter topic keeps what it archives; kfake has none")
	}
	topic := c.Topic(t, "share-kill", 3)
	group := kafkatest.UniqueName("share-kill-group")
	brokerDLQ := "dlq." + group
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"errors.deadletterqueue.group.enable": kmsg.StringPtr("true")}, brokerDLQ); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), brokerDLQ) })
	setGroupConfig(t, c, group, "errors.deadletterqueue.topic.name", brokerDLQ)
	setGroupConfig(t, c, group, "errors.deadletterqueue.copy.record.enable", "true")
	const n = 600
	kafkatest.Produce(t, manualProducer(t, c), shareRecords(topic, n)...)

	dir := t.TempDir()
	type worker struct {
		cmd *exec.Cmd
		log string
	}
	workers := make([]worker, 2)
	for i := range workers {
		w := worker{log: fmt.Sprintf("%s/worker-%d.log", dir, i)}
		w.cmd = exec.Command(os.Args[0], "-test.run=^TestShareWorker$", "-test.timeout=3m")
		w.cmd.Env = append(os.Environ(), envShareWorker+"=1", kafkatest.EnvBrokers+"="+strings.Join(c.Brokers(), ","),
			envShareTopic+"="+topic, envShareGroup+"="+group, envShareLog+"="+w.log)
		w.cmd.Stderr = os.Stderr
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.cmd.Process.Kill(); _ = w.cmd.Wait() })
		workers[i] = w
	}
	readLog := func(path string) []int {
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		var ids []int
		s := bufio.NewScanner(f)
		for s.Scan() {
			if id, err := strconv.Atoi(s.Text()); err == nil {
				ids = append(ids, id)
			}
		}
		return ids
	}

	var mu sync.Mutex
	processed := map[int]int{}
	for range 2 {
		m, err := consumer.New(shareConfig(c, t, topic, group, func(ctx context.Context, r *consumer.Record[string, shareJob]) error {
			time.Sleep(5 * time.Millisecond)
			if err := shareHandler(ctx, r); err != nil {
				return err
			}
			mu.Lock()
			processed[r.Value.ID]++
			mu.Unlock()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		runConsumer(t, m)
	}

	// Each worker dies once it has done some work: SIGKILL, no goodbye.
	for i, w := range workers {
		kafkatest.WaitFor(t, 60*time.Second, fmt.Sprintf("worker %d at work", i), func() bool { return len(readLog(w.log)) >= 20 })
		if err := w.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = w.cmd.Wait()
		t.Logf("worker %d killed after %d records", i, len(readLog(w.log)))
	}

	wantGood, wantDead := 0, 0
	for i := range n {
		if k := shareKind(i); k == kindOK || k == kindFlaky {
			wantGood++
		} else {
			wantDead++
		}
	}
	done := func() map[int]int {
		mu.Lock()
		out := make(map[int]int, len(processed))
		for id, k := range processed {
			out[id] += k
		}
		mu.Unlock()
		for _, w := range workers {
			for _, id := range readLog(w.log) {
				out[id]++
			}
		}
		return out
	}
	idOf := func(r *kgo.Record) int {
		id, err := strconv.Atoi(string(r.Key))
		if err != nil {
			t.Fatalf("letter with key %q", r.Key)
		}
		return id
	}
	var ours, theirs []*kgo.Record
	kafkatest.WaitFor(t, 90*time.Second, "every record processed or dead-lettered", func() bool {
		if len(done()) < wantGood {
			return false
		}
		ours, theirs = readAllIfAny(t, c, topic+".dlq"), readAllIfAny(t, c, brokerDLQ)
		dead := map[int]bool{}
		for _, l := range append(append([]*kgo.Record(nil), ours...), theirs...) {
			dead[idOf(l)] = true
		}
		return len(dead) >= wantDead
	})

	got := done()
	letters := map[int][]string{} // id -> delivery counts of Antidote's letters
	for _, l := range ours {
		count := ""
		for _, h := range l.Headers {
			if h.Key == consumer.HeaderDeliveryCount {
				count = string(h.Value)
			}
		}
		letters[idOf(l)] = append(letters[idOf(l)], count)
	}
	archived := map[int]string{} // id -> the broker's message
	for _, l := range theirs {
		f, err := deadletter.Parse(deadletter.RecordOf(l))
		if err != nil {
			t.Errorf("broker letter: %v", err)
			continue
		}
		archived[idOf(l)] = f.Reason
	}
	for i := range n {
		k := shareKind(i)
		good := k == kindOK || k == kindFlaky
		switch {
		case good && got[i] == 0 && archived[i] == "":
			t.Errorf("record %d (%s) lost: never processed", i, k)
		case good && len(letters[i]) > 0:
			t.Errorf("record %d (%s) dead-lettered by Antidote", i, k)
		case !good && got[i] > 0:
			t.Errorf("record %d (%s) processed", i, k)
		case !good && len(letters[i]) == 0 && archived[i] == "":
			t.Errorf("record %d (%s) lost: neither Antidote nor the broker dead-lettered it", i, k)
		}
		seen := map[string]bool{}
		for _, d := range letters[i] {
			if seen[d] {
				t.Errorf("record %d (%s): two letters on delivery %s: %v", i, k, d, letters[i])
			}
			seen[d] = true
		}
	}
	again := 0
	for _, k := range got {
		if k > 1 {
			again++
		}
	}
	t.Logf("%d processed (%d more than once), %d dead-lettered by Antidote (%d letters), %d archived into %s: %v",
		len(got), again, len(letters), len(ours), len(archived), brokerDLQ, archived)
}
