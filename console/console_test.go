package console_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

const token = "unit-token"

// letters produces n Antidote dead letters to a new topic of 3 partitions.
func letters(t *testing.T, n int) (*kafkatest.Cluster, string) {
	t.Helper()
	c := kafkatest.New(t)
	dlq := c.Topic(t, "u.dlq", 3)
	cl := c.Client(t, kgo.ProducerLinger(0))
	var rs []*kgo.Record
	for i := range n {
		stage, msg := deadletter.StageProcess, "negative amount"
		if i%3 == 0 {
			stage, msg = deadletter.StageDeserializeValue, "invalid character 'x'"
		}
		f := &deadletter.Failure{Stage: stage, Reason: deadletter.ReasonPermanent, Class: "permanent", ErrorType: "*errors.errorString", Message: msg,
			Topic: "orders", Partition: 0, Offset: int64(i), Group: "g", Attempts: 1, First: time.Now(), Last: time.Now()}
		rs = append(rs, &kgo.Record{Topic: dlq, Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf(`{"id":%d}`, i)), Headers: kafkatest.Headers(f.AppendHeaders(nil))})
	}
	kafkatest.Produce(t, cl, rs...)
	return c, dlq
}

func newServer(t *testing.T, c *kafkatest.Cluster, cfg console.Config) string {
	t.Helper()
	cfg.ClientOpts = []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}
	cfg.Token = token
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.IdleTimeout = 5 * time.Second
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return srv.URL
}

func get(t *testing.T, u string, bearer bool) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if bearer {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var pickRE = regexp.MustCompile(`name="letter" value="(\d+:\d+)"`)
var nextRE = regexp.MustCompile(`href="\?([^"]*after=[^"]*)" id="next"`)

// TestIntegrationPaging: the pages of the table hold every letter once,
// for the zero filter and for a filter.
func TestIntegrationPaging(t *testing.T) {
	c, dlq := letters(t, 23)
	base := newServer(t, c, console.Config{PageSize: 4})
	for _, q := range []string{"", "stage=process"} {
		seen := map[string]bool{}
		u := base + "/topics/" + dlq + "?" + q
		for page := 0; page < 20; page++ {
			code, body, _ := get(t, u, true)
			if code != 200 {
				t.Fatalf("%s: %d %s", u, code, body)
			}
			for _, m := range pickRE.FindAllStringSubmatch(body, -1) {
				if seen[m[1]] {
					t.Errorf("%s: letter %s twice", q, m[1])
				}
				seen[m[1]] = true
			}
			m := nextRE.FindStringSubmatch(body)
			if m == nil {
				break
			}
			next, _ := url.QueryUnescape(strings.ReplaceAll(m[1], "&amp;", "&"))
			u = base + "/topics/" + dlq + "?" + (&url.URL{RawQuery: next}).Query().Encode()
		}
		want := 23
		if q != "" {
			want = 15
		}
		if len(seen) != want {
			t.Errorf("filter %q: %d letters on the pages, want %d", q, len(seen), want)
		}
	}
	// The key filter, as dlq ls --key: one letter, and no redrive by
	// filter (which cannot select by key).
	code, body, _ := get(t, base+"/topics/"+dlq+"?key=k7", true)
	if code != 200 || len(pickRE.FindAllString(body, -1)) != 1 || !strings.Contains(body, ">k7<") {
		t.Errorf("key filter: %d, %d letters", code, len(pickRE.FindAllString(body, -1)))
	}
	if strings.Contains(body, `id="redrive-filter"`) {
		t.Error("a key-filtered table offers a redrive by filter, which would ignore the key")
	}
}
