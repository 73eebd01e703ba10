package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

const ctlToken = "ctl-test-token"

// ctlRig runs a consumer on a one-partition topic whose first record fails
// for ever (its error text carries a terminal escape), behind the admin API
// on a free loopback port. It returns the API's URL.
func ctlRig(t *testing.T) (string, string, *consumer.Consumer[string, string], *atomic.Int64) {
	t.Helper()
	c := kafkatest.New(t)
	topic := c.Topic(t, "ctl", 1)
	pcl := c.Client(t, kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, v := range []string{"poison", "ok"} {
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Int64
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"), Value: serde.String(),
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value == "poison" {
				return failure.Transient(errors.New("database down \x1b[31mred\x1b[0m"))
			}
			done.Add(1)
			return nil
		},
		Policy:         consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.Fixed(50 * time.Millisecond)}}},
		Logger:         slog.New(slog.DiscardHandler),
		CommitInterval: 100 * time.Millisecond,
		ClientOpts:     []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"orders": cons}, Token: ctlToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := h.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	runDone, srvDone := make(chan error, 1), make(chan error, 1)
	go func() { runDone <- cons.Run(runCtx) }()
	go func() { srvDone <- h.Serve(runCtx, ln) }()
	t.Cleanup(func() {
		stop()
		for _, ch := range []chan error{runDone, srvDone} {
			select {
			case <-ch:
			case <-time.After(60 * time.Second):
				t.Error("consumer or server did not stop within 60s")
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for st := cons.Stats(); len(st.Stuck) != 1 || !st.Ready; st = cons.Stats() {
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not get stuck within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + ln.Addr().String(), topic, cons, &done
}

// TestIntegrationCtl drives a stuck consumer with antidote ctl.
func TestIntegrationCtl(t *testing.T) {
	url, topic, cons, done := ctlRig(t)
	t.Setenv(admin.EnvToken, "")
	t.Setenv(EnvAdminURL, "")
	ctl := func(args ...string) (int, string, string) {
		return runCmd(t, append([]string{"ctl", "--admin", url, "--token", ctlToken}, args...)...)
	}

	code, out, errOut := ctl("status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	for _, want := range []string{"consumer orders: READY, retrying on", "TOPIC", topic, "stuck", "offset 0, retrying for", `database down \x1b[31mred\x1b[0m`} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("status printed a raw escape character:\n%q", out)
	}
	code, out, _ = ctl("status", "-o", "json")
	var st struct {
		Consumers map[string]struct {
			Stuck []struct{ Offset int64 }
		}
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Consumers["orders"].Stuck) != 1 {
		t.Fatalf("status -o json: %d %v %s", code, err, out)
	}

	// Errors from the server: one line, exit 1, nothing changed.
	code, _, errOut = ctl("skip", topic, "0", "1")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "409 Conflict: consumer: partition is not stuck on a record")
	code, _, errOut = ctl("skip", topic, "5", "0")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "404 Not Found")
	code, _, errOut = runCmd(t, "ctl", "--admin", url, "--token", "wrong", "retry", "off")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "401 Unauthorized: wrong bearer token: pass --token or set "+admin.EnvToken+" to the admin API's token")
	code, _, errOut = runCmd(t, "ctl", "--admin", url, "retry", "off")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "401 Unauthorized: no token given: pass --token or set "+admin.EnvToken+" to the admin API's token")
	code, _, errOut = ctl("flood", "resume")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "409 Conflict")
	code, _, errOut = ctl("flood", "go")
	clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, `flood "go": want resume`)
	code, _, errOut = ctl("--consumer", "payments", "retry", "off")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, `no consumer named "payments"`)
	if !cons.RetryEnabled() || cons.Stats().Skipped != 0 {
		t.Fatal("a refused command changed the consumer")
	}

	// Pause, resume, skip.
	if code, out, _ := ctl("pause", topic, "0"); code != 0 || !strings.Contains(out, "paused "+topic+"/0") {
		t.Fatalf("pause: %d %q", code, out)
	}
	if code, out, _ := ctl("status"); code != 0 || !strings.Contains(out, "operator") {
		t.Fatalf("status after pause does not show the operator pause:\n%s", out)
	}
	if code, out, _ := ctl("resume", topic, "0"); code != 0 || !strings.Contains(out, "resumed "+topic+"/0") {
		t.Fatalf("resume: %d %q", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(cons.Stats().Stuck) != 1 {
		if time.Now().After(deadline) {
			b, _ := json.Marshal(cons.Stats())
			t.Fatalf("the resumed partition did not get stuck again within 30s: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, out, errOut := ctl("skip", topic, "0", "0"); code != 0 || !strings.Contains(out, "skipped "+topic+"/0 at offset 0") {
		t.Fatalf("skip: %d %q %q", code, out, errOut)
	}
	deadline = time.Now().Add(30 * time.Second)
	for done.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the record after the skipped one was not processed within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := cons.Stats(); s.Skipped != 1 {
		t.Fatalf("Skipped = %d; want 1", s.Skipped)
	}

	// The kill switch, with the token from the environment.
	t.Setenv(admin.EnvToken, ctlToken)
	if code, out, errOut := runCmd(t, "ctl", "--admin", url, "retry", "off"); code != 0 || !strings.Contains(out, "orders: retrying off") || cons.RetryEnabled() {
		t.Fatalf("retry off: %d %q %q (retry enabled %v)", code, out, errOut, cons.RetryEnabled())
	}
	if code, out, _ := ctl("retry", "on", "-o", "json"); code != 0 || !strings.Contains(out, `"retry_enabled": true`) || !cons.RetryEnabled() {
		t.Fatalf("retry on -o json: %d %q", code, out)
	}
}

func TestCtlBadInput(t *testing.T) {
	t.Setenv(EnvAdminURL, "")
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"ctl", "status"}, cli.ExitUsage, "--admin: the admin API's URL is required"},
		{[]string{"ctl", "--admin", "ftp://127.0.0.1:1", "status"}, cli.ExitUsage, `--admin "ftp://127.0.0.1:1"`},
		{[]string{"ctl", "--admin", "127.0.0.1:1", "status"}, cli.ExitUsage, "want http://HOST:PORT"},
		{[]string{"ctl", "--admin", closed}, cli.ExitUsage, "name a command"},
		{[]string{"ctl", "--admin", closed, "rewind"}, cli.ExitUsage, `unknown command "rewind"`},
		{[]string{"ctl", "--admin", closed, "retry", "maybe"}, cli.ExitUsage, `retry "maybe": want on or off`},
		{[]string{"ctl", "--admin", closed, "retry"}, cli.ExitUsage, "accepts 1 arg"},
		{[]string{"ctl", "--admin", closed, "skip", "orders", "x", "0"}, cli.ExitUsage, `partition "x"`},
		{[]string{"ctl", "--admin", closed, "skip", "orders", "0", "3rd"}, cli.ExitUsage, `offset "3rd"`},
		{[]string{"ctl", "--admin", closed, "skip", "--", "orders", "0", "-3"}, cli.ExitUsage, `offset "-3"`},
		{[]string{"ctl", "--admin", closed, "skip", "orders", "0"}, cli.ExitUsage, "accepts 3 arg"},
		{[]string{"ctl", "--admin", closed, "pause", "orders"}, cli.ExitUsage, "accepts 2 arg"},
		{[]string{"ctl", "--admin", closed, "status"}, cli.ExitFailure, "admin API at " + closed},
	} {
		code, _, errOut := runCmd(t, tc.args...)
		clitest.CheckOneLineError(t, code, tc.code, errOut, tc.contains)
	}
}

func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode": "plain text, ünïcode",
		"a\x1b[2Jb":           `a\x1b[2Jb`,
		"line\nbreak\ttab":    `line\nbreak\ttab`,
		"bidi\u202eevil":      `bidi\u202eevil`,
	} {
		if got := terminalSafe(in); got != want {
			t.Errorf("terminalSafe(%q) = %q; want %q", in, got, want)
		}
	}
}

// FuzzCtlStatus: whatever JSON an admin API answers, status renders it
// without a panic and without a control character reaching the terminal.
func FuzzCtlStatus(f *testing.F) {
	f.Add(`{"consumers":{"orders":{"Ready":true,"Partitions":[{"Topic":"orders","Partition":0,"State":"stuck","Lag":3}],"Stuck":[{"Topic":"orders","Partition":0,"Offset":7,"Reason":"retrying","LastError":"boom \u001b[2J"}]}}}`)
	f.Add(`{"consumers":{"a\u0007":{"Dependencies":{"reg\r":"open\u202e"},"Brokers":{"LastError":"x\ny"}}}}`)
	f.Add(`{"consumers":{}}`)
	f.Add(`{"consumers":{"x":{"Stuck":[{"Since":"0001-01-01T00:00:00Z"}]}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var all struct {
			Consumers map[string]ctlStats `json:"consumers"`
		}
		if json.Unmarshal([]byte(body), &all) != nil {
			return
		}
		var b strings.Builder
		for name, s := range all.Consumers {
			printCtlStatus(&b, name, s, time.Now())
		}
		for _, r := range b.String() {
			if r != '\n' && (r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e') {
				t.Fatalf("control character %U in the output:\n%q", r, b.String())
			}
		}
	})
}

// TestStatusFlood: while the flood guard holds the consumer, status does
// not say READY, and names the command that lets it go on.
func TestStatusFlood(t *testing.T) {
	var s ctlStats
	if err := json.Unmarshal([]byte(`{"Ready": true, "Running": true, "RetryEnabled": true,
		"Brokers": {"Reachable": true},
		"Partitions": [{"Topic": "orders", "Partition": 0, "State": "stuck", "Paused": "stuck"}],
		"Flood": {"Topic": "orders", "Partition": 0, "Offset": 41, "DeadLetters": 100, "Records": 160, "Window": 1000, "Share": 0.5, "Min": 100, "Since": "2026-01-01T00:00:00Z"}}`), &s); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printCtlStatus(&b, "orders", s, time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC))
	out := b.String()
	for _, want := range []string{"consumer orders: HELD BY THE FLOOD GUARD,", "flood guard tripped on orders[0] offset 41 5m ago: 100 dead letters of the last 160 records (62%, more than 50%)", "antidote ctl flood resume"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// TestStatusShareGroup: a share-group member's status shows its group, a
// broken setup loudly, and the records it retries in place, not "no
// partitions assigned".
func TestStatusShareGroup(t *testing.T) {
	var s ctlStats
	if err := json.Unmarshal([]byte(`{"Ready": true, "Running": true, "RetryEnabled": true,
		"Brokers": {"Reachable": true},
		"Stuck": [{"Topic": "jobs", "Partition": 1, "Offset": 7, "Reason": "retrying", "Attempts": 3, "Since": "2026-01-01T00:04:00Z", "LastError": "database down"}],
		"ShareGroup": {"Group": "workers", "DeliveryLimit": 5, "Acquired": 120, "Redelivered": 4, "Accepted": 110, "Released": 4, "Renewed": 9, "Held": 6,
			"Problems": ["the broker's dead-letter topic dlq.workers (errors.deadletterqueue.topic.name) does not exist"]}}`), &s); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printCtlStatus(&b, "jobs", s, time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC))
	out := b.String()
	for _, want := range []string{"consumer jobs: READY,",
		"share group workers: delivery limit 5; acquired 120 (4 delivered before), accepted 110, released 4, renewed 9, held now 6",
		"SHARE GROUP SETUP: the broker's dead-letter topic dlq.workers", "jobs   1          7       for 1m, 3 attempt(s): database down"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "no partitions assigned") {
		t.Errorf("status says no partitions assigned:\n%s", out)
	}
}

// TestIntegrationCtlDeadLetter: ctl deadletter sends the record a partition
// is stuck on to its dead-letter topic, refuses an offset it is not stuck
// on, and the partition moves on.
func TestIntegrationCtlDeadLetter(t *testing.T) {
	url, topic, cons, done := ctlRig(t)
	ctl := func(args ...string) (int, string, string) {
		return runCmd(t, append([]string{"ctl", "--admin", url, "--token", ctlToken}, args...)...)
	}
	kafkatest.WaitFor(t, 30*time.Second, "stuck", func() bool { return len(cons.Stats().Stuck) == 1 })
	code, _, errOut := ctl("deadletter", topic, "0", "1", "--who", "alice")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "409 Conflict: consumer: partition is not stuck on a record")
	if code, out, errOut := ctl("deadletter", topic, "0", "0", "--who", "alice"); code != 0 || !strings.Contains(out, "dead-lettered "+topic+"/0 at offset 0") {
		t.Fatalf("deadletter: %d %q %q", code, out, errOut)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the record after the dead-lettered one", func() bool { return done.Load() == 1 })
	kafkatest.WaitFor(t, 30*time.Second, "the letter acknowledged", func() bool { return cons.Stats().DeadLettered == 1 })
	if s := cons.Stats(); s.DeadLettered != 1 || s.Skipped != 0 {
		t.Fatalf("DeadLettered %d, Skipped %d; want 1, 0", s.DeadLettered, s.Skipped)
	}
}
