package console_test

import (
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
)

// fakeConsumer is an admin.Consumer whose partitions the test sets, and
// which records the operator's calls.
type fakeConsumer struct {
	mu     sync.Mutex
	stats  consumer.Stats
	paused map[string]bool
	calls  []string
}

func (f *fakeConsumer) Stats() consumer.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	st.Partitions = append([]consumer.Partition(nil), st.Partitions...)
	for i, p := range st.Partitions {
		if f.paused[p.Topic+"/"+strconv.Itoa(int(p.Partition))] {
			st.Partitions[i].State, st.Partitions[i].Paused = consumer.PartitionPaused, consumer.PauseOperator
		}
	}
	return st
}
func (f *fakeConsumer) SetRetryEnabled(bool)                          {}
func (f *fakeConsumer) RetryEnabled() bool                            { return true }
func (f *fakeConsumer) Skip(string, int32, int64) error               { return nil }
func (f *fakeConsumer) DeadLetter(string, int32, int64, string) error { return nil }
func (f *fakeConsumer) ResumeFlood() error                            { return nil }
func (f *fakeConsumer) Pause(topic string, p int32) error             { return f.set("pause", topic, p, true) }
func (f *fakeConsumer) Resume(topic string, p int32) error            { return f.set("resume", topic, p, false) }
func (f *fakeConsumer) set(what, topic string, p int32, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := topic + "/" + strconv.Itoa(int(p))
	f.calls = append(f.calls, what+" "+k)
	if f.paused == nil {
		f.paused = map[string]bool{}
	}
	f.paused[k] = on
	return nil
}

// consoleOf serves a console over cons (no Kafka is reached) and returns
// a function that sends a request with the bearer token.
func consoleOf(t *testing.T, cons admin.Consumer) func(method, path string, form url.Values) (int, string) {
	t.Helper()
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token,
		Logger: slog.New(slog.DiscardHandler), Consumers: map[string]admin.Consumer{"orders": cons},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(method, path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

var formRE = regexp.MustCompile(`(?s)<form method="post" action="([^"]*/(?:pause|resume))"[^>]*>(.*?)</form>`)
var inputRE = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// TestConsumerPauseResume: the consumer page shows each partition's
// number, and its Pause and Resume forms post what the action reads.
func TestConsumerPauseResume(t *testing.T) {
	f := &fakeConsumer{stats: consumer.Stats{Running: true, Partitions: []consumer.Partition{
		{Topic: "orders2", Partition: 1, State: consumer.PartitionStuck, Paused: consumer.PauseStuck, Committed: 163, Lag: 1, HighWatermark: 164},
	}}}
	do := consoleOf(t, f)
	press := func(want string) {
		t.Helper()
		code, body := do("GET", "/consumers/orders", nil)
		if code != 200 {
			t.Fatalf("consumer page: %d %s", code, body)
		}
		if strings.Contains(body, "{orders2") || strings.Contains(body, "stuck (stuck)") {
			t.Errorf("the partition row prints a struct or says stuck twice:\n%s", body)
		}
		m := formRE.FindStringSubmatch(body)
		if m == nil || !strings.HasSuffix(m[1], "/"+want) {
			t.Fatalf("no %s form in the page:\n%s", want, body)
		}
		form := url.Values{}
		for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
			form.Set(in[1], html.UnescapeString(in[2]))
		}
		if form.Get("partition") != "1" || form.Get("topic") != "orders2" {
			t.Errorf("the %s form posts topic %q partition %q, want orders2 and 1", want, form.Get("topic"), form.Get("partition"))
		}
		if code, body := do("POST", m[1], form); code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", want, code, body)
		}
	}
	press("pause")
	press("resume")
	if got := strings.Join(f.calls, ", "); got != "pause orders2/1, resume orders2/1" {
		t.Errorf("calls %q, want a pause and a resume of orders2/1", got)
	}
}
