package group

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
)

func tree() []*cobra.Command { return []*cobra.Command{NewCommand()} }

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run(t, tree, args...)
}

// stuckGroup makes a topic holding a good record, a poison pill with a
// header, and a good record, and a group whose committed offset is the
// pill's (1): a consumer that processed the first record and is stuck on
// the second, then stopped.
func stuckGroup(t *testing.T, c *kafkatest.Cluster) (topic, group string) {
	t.Helper()
	topic = c.Topic(t, "rescue", 1)
	group = kafkatest.UniqueName("stuck")
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl,
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(`{"n":0}`)},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte{0xff, 0x00, 0x1b, '['}, Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(`{"n":2}`)})
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, 1, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("committing offset 1 for %s: %v", group, err)
	}
	return topic, group
}

func committedAt(t *testing.T, c *kafkatest.Cluster, group, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(c.Client(t)).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return -1
	}
	return o.At
}

func readLetters(t *testing.T, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		out = append(out, fs.Records()...)
		if len(out) > 0 {
			// One more short poll: nothing else may follow.
			sctx, scancel := context.WithTimeout(context.Background(), time.Second)
			out = append(out, cl.PollFetches(sctx).Records()...)
			scancel()
			return out
		}
	}
}

// checkLetter checks the copy of the pill: its bytes, its headers, and the
// failure headers of a rescue.
func checkLetter(t *testing.T, l *kgo.Record, topic, group string) {
	t.Helper()
	if !bytes.Equal(l.Value, []byte{0xff, 0x00, 0x1b, '['}) || string(l.Key) != "k" || l.Partition != 0 {
		t.Errorf("letter %q/%q in partition %d; want the pill's key and value, byte for byte, in partition 0", l.Key, l.Value, l.Partition)
	}
	p, err := deadletter.ParseRecord(l)
	if err != nil {
		t.Fatalf("the letter does not parse: %v", err)
	}
	if p.Reason != string(deadletter.ReasonRescue) || p.OriginalTopic != topic || p.OriginalPartition != 0 || p.OriginalOffset != 1 || p.Group != group {
		t.Errorf("letter %+v; want reason %s, %s/0/1, group %s", p, deadletter.ReasonRescue, topic, group)
	}
	if !strings.Contains(p.Message, "alice") {
		t.Errorf("message %q does not name who asked", p.Message)
	}
	if len(p.OriginalHeaders) != 1 || p.OriginalHeaders[0].Key != "trace" || string(p.OriginalHeaders[0].Value) != "t-1" {
		t.Errorf("original headers %v; want the pill's one header", p.OriginalHeaders)
	}
}

// TestIntegrationGroupRescue: a group stuck on a pill (committed offset 1)
// is moved to offset 2, and the pill is in the dead-letter topic in
// Antidote's format; plain, then in one transaction.
func TestIntegrationGroupRescue(t *testing.T) {
	c := kafkatest.New(t)
	for _, mode := range []string{"plain", "transactional"} {
		t.Run(mode, func(t *testing.T) {
			topic, group := stuckGroup(t, c)
			args := []string{"group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
				"--topic", topic, "--partition", "0", "--who", "alice", "--yes", "-o", "json"}
			if mode == "transactional" {
				args = append(args, "--transactional")
			}
			code, out, errOut := runCmd(t, args...)
			if code != 0 {
				t.Fatalf("rescue: exit %d: %s", code, errOut)
			}
			var r rescued
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("rescue output %q: %v", out, err)
			}
			if r.Offset != 1 || r.Committed != 2 || r.DLQTopic != topic+".dlq" || r.DLQPartition != 0 || r.Transactional != (mode == "transactional") {
				t.Errorf("rescue said %+v", r)
			}
			if at := committedAt(t, c, group, topic); at != 2 {
				t.Errorf("group %s committed %d after the rescue; want 2", group, at)
			}
			letters := readLetters(t, c, topic+".dlq")
			if len(letters) != 1 {
				t.Fatalf("%d letters in %s; want the pill", len(letters), topic+".dlq")
			}
			checkLetter(t, letters[0], topic, group)
			var r2 rescued
			if err := json.Unmarshal([]byte(out), &r2); err != nil {
				t.Errorf("-o json printed more than its JSON: %q", out)
			}

			// The group is at offset 2 now: a record that is not the
			// committed one is refused, and so is a rescue at the end.
			code, _, errOut = runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
				"--topic", topic, "--partition", "0", "--offset", "1", "--yes")
			clitest.CheckOneLineError(t, code, 1, errOut, "is at offset 2 of "+topic+" partition 0, not 1")
			var offs kadm.Offsets
			offs.AddOffset(topic, 0, 3, -1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := kadm.NewClient(c.Client(t)).CommitOffsets(ctx, group, offs); err != nil {
				t.Fatal(err)
			}
			code, _, errOut = runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
				"--topic", topic, "--partition", "0", "--yes")
			clitest.CheckOneLineError(t, code, 1, errOut, "at or past its end")
			if n := len(readLetters(t, c, topic+".dlq")); n != 1 {
				t.Errorf("%d letters after the refused rescues; want still 1", n)
			}
		})
	}
}

// TestIntegrationGroupRescueRefusesMembers: a group with a member is
// refused, with who the members are, and nothing is written or committed.
func TestIntegrationGroupRescueRefusesMembers(t *testing.T) {
	c := kafkatest.New(t)
	topic, group := stuckGroup(t, c)
	member := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID("billing-worker"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkatest.WaitFor(t, 30*time.Second, "the member joined", func() bool {
		member.PollRecords(ctx, 1) // joins; nothing is committed (no autocommit of records not polled past)
		gs, err := kadm.NewClient(c.Client(t)).DescribeGroups(ctx, group)
		return err == nil && len(gs[group].Members) == 1
	})
	code, _, errOut := runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
		"--topic", topic, "--partition", "0", "--yes")
	clitest.CheckOneLineError(t, code, 1, errOut, "has 1 members (billing-worker@")
	if n := len(readLetters(t, c, topic+".dlq")); n != 0 {
		t.Errorf("%d letters after a refused rescue; want none", n)
	}
}

// joinMember makes a member of group that consumes topic and commits
// nothing, and waits until the group has it.
func joinMember(t *testing.T, c *kafkatest.Cluster, group, topic string) {
	t.Helper()
	member := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID("billing-worker"), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafkatest.WaitFor(t, 30*time.Second, "the member joined", func() bool {
		member.PollRecords(ctx, 1)
		gs, err := kadm.NewClient(c.Client(t)).DescribeGroups(ctx, group)
		return err == nil && len(gs[group].Members) == 1 && gs[group].State == "Stable"
	})
}

// TestIntegrationGroupRescueForce: --force goes on although the group has
// a member, and says so. A plain rescue writes the copy, then the broker
// refuses the commit: the error says where the copy is, and the group is
// still at the pill. A transactional one commits: Kafka takes a
// transaction's offsets for a group that has members.
func TestIntegrationGroupRescueForce(t *testing.T) {
	c := kafkatest.New(t)
	t.Run("plain", func(t *testing.T) {
		topic, group := stuckGroup(t, c)
		joinMember(t, c, group, topic)
		code, out, errOut := runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
			"--topic", topic, "--partition", "0", "--who", "alice", "--yes", "--force")
		if code != 1 {
			t.Fatalf("rescue --force of a group with a member: exit %d, want 1 (the commit refused)\nstdout %s\nstderr %s", code, out, errOut)
		}
		if !strings.Contains(out, "group "+group+" is at "+topic+" partition 0 offset 1:") {
			t.Errorf("the record is not shown: %q", out)
		}
		warning, rest, _ := strings.Cut(errOut, "\n")
		if !strings.Contains(warning, `warning: group "`+group+`" has 1 members (billing-worker@`) || !strings.Contains(warning, "going on (--force)") {
			t.Errorf("first stderr line %q: want a warning naming the member", warning)
		}
		clitest.CheckOneLineError(t, code, 1, rest, "the copy is at "+topic+".dlq partition 0 offset 0, but committing offset 2 for group "+group+" failed")
		if at := committedAt(t, c, group, topic); at != 1 {
			t.Errorf("group %s committed %d after the refused commit; want still 1", group, at)
		}
		letters := readLetters(t, c, topic+".dlq")
		if len(letters) != 1 {
			t.Fatalf("%d letters in %s; want the copy written before the commit", len(letters), topic+".dlq")
		}
		checkLetter(t, letters[0], topic, group)
	})
	t.Run("transactional", func(t *testing.T) {
		topic, group := stuckGroup(t, c)
		joinMember(t, c, group, topic)
		code, out, errOut := runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
			"--topic", topic, "--partition", "0", "--who", "alice", "--yes", "--force", "--transactional")
		if !strings.Contains(errOut, "going on (--force)") {
			t.Errorf("stderr %q: want the warning", errOut)
		}
		at := committedAt(t, c, group, topic)
		letters := readLetters(t, c, topic+".dlq")
		// Kafka takes a transaction's offsets for a group with members (the
		// help and docs say so): the copy and the commit both happen.
		if code != 0 || at != 2 || len(letters) != 1 {
			t.Fatalf("exit %d, group at %d, %d letters: want exit 0, the group at 2 and one letter\nstdout %s\nstderr %s", code, at, len(letters), out, errOut)
		}
		checkLetter(t, letters[0], topic, group)
	})
}

// TestIntegrationGroupRescueUsage: what is missing or wrong is a usage
// error that says so.
func TestIntegrationGroupRescueUsage(t *testing.T) {
	code, _, errOut := runCmd(t, "group", "rescue", "--group", "g", "--topic", "t")
	clitest.CheckOneLineError(t, code, 2, errOut, "--group, --topic and --partition are required")
	code, _, errOut = runCmd(t, "group", "rescue", "--group", "g", "--topic", "t", "--partition", "0", "--offset", "-3")
	clitest.CheckOneLineError(t, code, 2, errOut, "--offset -3: must not be negative")
	code, _, errOut = runCmd(t, "group", "rescu")
	clitest.CheckOneLineError(t, code, 2, errOut, "rescue")
}

// TestIntegrationGroupRescueForeignConsumer: the seeds' story on a real
// broker. A Python consumer (confluent-kafka, librdkafka) loops on a
// poison pill. rescue refuses while it runs; once it is stopped, rescue
// moves its group past the pill, and the consumer, started again, goes on
// with the next record. The pill is in the dead-letter topic.
func TestIntegrationGroupRescueForeignConsumer(t *testing.T) {
	c := kafkatest.New(t)
	if !c.Real() {
		t.Skip("a foreign client needs the real broker")
	}
	py := srtest.Python(t)
	topic := c.Topic(t, "foreign", 1)
	group := kafkatest.UniqueName("python")
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, cl,
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(`{"n":0}`)},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte{0xff, 0x00, 0x1b, '['}, Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(`{"last":true}`)})

	first := startStuck(t, py, c, group, topic)
	first.waitFor(t, `{"ev": "stuck", "offset": 1}`)
	code, _, errOut := runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
		"--topic", topic, "--partition", "0", "--yes", "--who", "alice")
	clitest.CheckOneLineError(t, code, 1, errOut, "has 1 members")
	first.stop(t)

	code, _, errOut = runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
		"--topic", topic, "--partition", "0", "--yes", "--who", "alice")
	if code != 0 {
		t.Fatalf("rescue after the consumer stopped: exit %d: %s", code, errOut)
	}
	second := startStuck(t, py, c, group, topic)
	second.waitFor(t, `{"ev": "processed", "offset": 2}`)
	if err := second.wait(30 * time.Second); err != nil {
		t.Fatalf("the consumer did not end after the last record: %v\n%s", err, second.output())
	}
	if strings.Contains(second.output(), `"stuck"`) {
		t.Errorf("the consumer was stuck again after the rescue:\n%s", second.output())
	}
	letters := readLetters(t, c, topic+".dlq")
	if len(letters) != 1 {
		t.Fatalf("%d letters; want the pill", len(letters))
	}
	checkLetter(t, letters[0], topic, group)
}

// stuckProc is scripts/python/stuck_consumer.py running.
type stuckProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan error
}

func startStuck(t *testing.T, py string, c *kafkatest.Cluster, group, topic string) *stuckProc {
	t.Helper()
	script := filepath.Join(srtest.RepoRoot(t), "scripts", "python", "stuck_consumer.py")
	p := &stuckProc{done: make(chan error, 1)}
	p.cmd = exec.Command(py, script, "--brokers", strings.Join(c.Brokers(), ","), "--group", group, "--topic", topic)
	p.cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	p.cmd.Stderr = &stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting the Python consumer: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
	return p
}

func (p *stuckProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *stuckProc) waitFor(t *testing.T, line string) {
	t.Helper()
	kafkatest.WaitFor(t, 60*time.Second, "the Python consumer to print "+line, func() bool {
		return strings.Contains(p.output(), line)
	})
}

func (p *stuckProc) wait(d time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(d):
		return context.DeadlineExceeded
	}
}

// stop ends the consumer with SIGTERM: it leaves its group cleanly.
func (p *stuckProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(30 * time.Second); err != nil {
		t.Fatalf("the Python consumer did not stop on SIGTERM: %v", err)
	}
}

// TestIntegrationGroupRescueShowsSafely: the record shown before the
// question is hostile input: its escape sequences reach the terminal
// escaped, and bytes that are not UTF-8 are shown as hex.
func TestIntegrationGroupRescueShowsSafely(t *testing.T) {
	c := kafkatest.New(t)
	topic, group := stuckGroup(t, c)
	code, out, errOut := runCmd(t, "group", "rescue", "--brokers", strings.Join(c.Brokers(), ","), "--group", group,
		"--topic", topic, "--partition", "0", "--yes")
	if code != 0 {
		t.Fatalf("rescue: exit %d: %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\a") || !strings.Contains(out, "value      hex ff001b5b (4 bytes)") {
		t.Errorf("output %q: want no control byte, and the value in hex", out)
	}
}

// TestAwaitCommitted: after its transaction, a transactional rescue waits
// until the group's offset reads the new one (Kafka applies a transaction's
// offsets when the commit marker reaches the group coordinator, after EndTxn
// answered; in CI on Kafka 4.1.1 the offset read 1 right after a rescue to
// 2), and says what it reads when it never does.
func TestAwaitCommitted(t *testing.T) {
	c := kafkatest.New(t)
	topic, group := stuckGroup(t, c) // committed at 1
	adm := kadm.NewClient(c.Client(t))
	f := rescueFlags{group: group, topic: topic}
	err := awaitCommitted(context.Background(), adm, 300*time.Millisecond, f, 2)
	if err == nil || !strings.Contains(err.Error(), "still reads offset 1") || !strings.Contains(err.Error(), "not 2") {
		t.Fatalf("with the group at 1, awaiting 2: %v; want an error that says it still reads 1", err)
	}
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, 2, -1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.CommitOffsets(ctx, group, offs)
	}()
	if err := awaitCommitted(context.Background(), adm, 10*time.Second, f, 2); err != nil {
		t.Fatalf("the offset moved to 2 while awaiting it: %v", err)
	}
}
