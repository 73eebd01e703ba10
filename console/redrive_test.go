package console_test

import (
	"context"
	"io"
	"net/http"
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

// post sends a form with the bearer token and returns the status, the body
// and the redirect.
func post(t *testing.T, u string, form url.Values) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

// TestIntegrationRedriveLoopGuard: the console's redrive is the command's:
// a letter already redriven three times is refused, in the dry run and in
// the redrive; a redrive without its confirmation is refused.
func TestIntegrationRedriveLoopGuard(t *testing.T) {
	c, dlq := letters(t, 2) // two letters of topic "orders"
	src := c.Topic(t, "orders-src", 1)
	cl := c.Client(t, kgo.ProducerLinger(0))
	f := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: deadletter.ReasonPermanent, Class: "permanent", Message: "looping", Topic: src, OriginalHeaders: 1}
	hs := kafkatest.Headers(f.AppendHeaders([]deadletter.Header{{Key: deadletter.HeaderRedriveCount, Value: []byte("3")}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kafkatest.Produce(t, cl, &kgo.Record{Topic: dlq, Value: []byte("again"), Headers: hs})
	base := newServer(t, c, console.Config{})
	_, page, _ := get(t, base+"/topics/"+dlq+"?reason=looping", true)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token")
	}
	form := url.Values{"csrf": {m[1]}, "reason": {"looping"}, "scope": {"filter"}, "action": {"dry-run"}}
	code, body, _ := post(t, base+"/topics/"+dlq+"/redrive", form)
	if code != 200 || !strings.Contains(body, `id="would">0<`) || !strings.Contains(body, `id="refused">1<`) || !strings.Contains(body, "redriven 3 times already (max 3)") {
		t.Fatalf("dry run: %d %s", code, body)
	}
	form.Set("action", "redrive")
	if code, _, _ := post(t, base+"/topics/"+dlq+"/redrive", form); code != http.StatusBadRequest {
		t.Errorf("redrive without the confirmation: %d, want 400", code)
	}
	form.Set("confirm", "yes")
	code, _, loc := post(t, base+"/topics/"+dlq+"/redrive", form)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/jobs/") {
		t.Fatalf("redrive: %d to %q", code, loc)
	}
	var job string
	kafkatest.WaitFor(t, 30*time.Second, "the redrive job to end (its page done or failed)", func() bool {
		_, job, _ = get(t, base+loc, true)
		return strings.Contains(job, `class="done"`) || strings.Contains(job, `class="failed"`)
	})
	if !strings.Contains(job, `id="redriven">0<`) || !strings.Contains(job, `id="job-refused">1<`) {
		t.Errorf("redrive page: %s", job)
	}
	// Nothing reached the source topic.
	n := 0
	err := deadletter.Scan(ctx, c.Client(t, deadletter.ScanOpts()...), deadletter.ScanConfig{Topic: src, IdleTimeout: 5 * time.Second}, func(*kgo.Record) error { n++; return nil })
	if err != nil || n != 0 {
		t.Errorf("the source topic holds %d records (%v), want none", n, err)
	}
}
