package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// purgeFixture is a console under /ui/ with the test provider's logins,
// on a dead-letter topic of one partition: letters of "negative amount" at
// offsets 0-2 and 4-5, and at 3 one the filter reason=negative passes over.
type purgeFixture struct {
	b   *browser
	f   *fakeLogin
	h   *console.Handler
	c   *kafkatest.Cluster
	cl  *kgo.Client
	dlq string
}

func newPurgeFixture(t *testing.T) *purgeFixture {
	t.Helper()
	c := kafkatest.New(t)
	fx := &purgeFixture{f: &fakeLogin{}, c: c, dlq: c.Topic(t, "p.dlq", 1), cl: c.Client(t, kgo.ProducerLinger(0))}
	src := c.Topic(t, "orders", 1)
	var rs []*kgo.Record
	for i := range 6 {
		msg := "negative amount"
		if i == 3 {
			msg = "invalid character 'x'"
		}
		f := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: deadletter.ReasonPermanent, Class: "permanent", Message: msg, Topic: src, Offset: int64(i)}
		rs = append(rs, &kgo.Record{Topic: fx.dlq, Value: fmt.Appendf(nil, "letter %d", i), Headers: kafkatest.Headers(f.AppendHeaders(nil))})
	}
	kafkatest.Produce(t, fx.cl, rs...)
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Prefix: "/ui/",
		Logger: slog.New(slog.DiscardHandler), Login: fx.f, IdleTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	fx.h = h
	fx.b = &browser{t: t, base: srv.URL, cl: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	return fx
}

func bearer(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }

// redrive starts a redrive of the filter form and returns its job's path.
func (fx *purgeFixture) redrive(t *testing.T, filter url.Values) string {
	t.Helper()
	form := url.Values{"scope": {"filter"}, "action": {"redrive"}, "confirm": {"yes"}}
	for k, v := range filter {
		form[k] = v
	}
	resp, body := fx.b.do("POST", "/ui/topics/"+fx.dlq+"/redrive", form, nil, bearer)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/jobs/") {
		t.Fatalf("redrive: %d to %q: %s", resp.StatusCode, loc, body)
	}
	return loc
}

func (fx *purgeFixture) waitDone(t *testing.T, job string) string {
	t.Helper()
	var body string
	kafkatest.WaitFor(t, 30*time.Second, "the redrive job to end", func() bool {
		_, body = fx.b.do("GET", job, nil, nil, bearer)
		return strings.Contains(body, `class="done"`) || strings.Contains(body, `class="failed"`)
	})
	return body
}

func (fx *purgeFixture) logStart(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	starts, _, err := deadletter.Bounds(ctx, fx.cl, fx.dlq)
	if err != nil {
		t.Fatal(err)
	}
	return starts[0]
}

var belowRE = regexp.MustCompile(`name="below" value="([^"]+)"`)

// TestIntegrationPurge: once a redrive of the console has finished, its
// purge shows the plan (to the letter the filter passed over, and why),
// and an operator's confirmed POST with the CSRF token deletes the letters
// below it, never that letter, even when the form asks for more. A viewer
// reads the plan and is refused the purge; a running redrive has none;
// every try is in the audit log.
func TestIntegrationPurge(t *testing.T) {
	fx := newPurgeFixture(t)
	b := fx.b

	// While the redrive runs (its fetch held), it has nothing to purge.
	var release func()
	if fake := fx.c.Fake(); fake != nil {
		ch := make(chan struct{})
		release = sync.OnceFunc(func() { close(ch) })
		t.Cleanup(release)
		fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			select {
			case <-ch:
				fake.DropControl()
			default:
				fake.SleepControl(func() { <-ch })
			}
			return nil, nil, false
		})
	}
	job := fx.redrive(t, url.Values{"reason": {"negative"}})
	if release != nil {
		if resp, body := b.do("GET", job+"/purge", nil, nil, bearer); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "the redrive is running") {
			t.Errorf("purge of a running redrive: %d, want 409: %s", resp.StatusCode, body)
		}
		release()
	}
	if page := fx.waitDone(t, job); !strings.Contains(page, `id="redriven">5<`) || !strings.Contains(page, `id="purge-redriven"`) {
		t.Fatalf("the finished redrive's page: want 5 redriven and the purge's button: %s", page)
	}
	if resp, _ := b.do("GET", "/ui/jobs/nosuchjob/purge", nil, nil, bearer); resp.StatusCode != http.StatusNotFound {
		t.Errorf("purge of an unknown redrive: %d, want 404", resp.StatusCode)
	}

	// A viewer reads the plan, its button greyed, and is refused.
	viewer, _, _ := b.loginVia(fx.f, "viewer")
	resp, body := b.do("GET", job+"/purge", nil, viewer, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="to-delete">3<`) || !regexp.MustCompile(`<button type="submit" disabled[^>]*id="purge"`).MatchString(body) {
		t.Fatalf("the viewer's plan: %d, want 3 letters and the button greyed: %s", resp.StatusCode, body)
	}
	form := url.Values{"csrf": {csrfRE.FindStringSubmatch(body)[1]}, "confirm": {"yes"}, "below": belowRE.FindAllStringSubmatch(body, -1)[0][1:]}
	if resp, body := b.do("POST", job+"/purge", form, viewer, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "and purge is an operator") {
		t.Errorf("the viewer's purge: %d, want 403: %s", resp.StatusCode, body)
	}

	// The operator's plan: offsets 0 to 2, stopping below 0:3, which the
	// filter passed over.
	operator, _, _ := b.loginVia(fx.f, "operator")
	resp, body = b.do("GET", job+"/purge", nil, operator, nil)
	for _, want := range []string{`id="to-delete">3<`, "<td>0 to 2</td>", `letters/0/3">0:3</a>`, "the redrive passed over it", `name="below" value="0:3"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan lacks %q: %d %s", want, resp.StatusCode, body)
		}
	}
	csrf := csrfRE.FindStringSubmatch(body)[1]
	// Without the CSRF token, with a wrong one, without the confirmation:
	// refused, nothing deleted.
	for name, f := range map[string]url.Values{
		"no CSRF token":    {"confirm": {"yes"}, "below": {"0:3"}},
		"wrong CSRF token": {"csrf": {strings.Repeat("0", len(csrf))}, "confirm": {"yes"}, "below": {"0:3"}},
	} {
		if resp, _ := b.do("POST", job+"/purge", f, operator, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if resp, _ := b.do("POST", job+"/purge", url.Values{"csrf": {csrf}, "below": {"0:3"}}, operator, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("without the confirmation: %d, want 400", resp.StatusCode)
	}
	if s := fx.logStart(t); s != 0 {
		t.Fatalf("refused purges moved the log start to %d", s)
	}

	// A form that asks for every letter up to the redrive's progress:
	// the letter at 3, never redriven, stays.
	resp, body = b.do("POST", job+"/purge", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "below": {"0:6"}}, operator, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="deleted">3<`) {
		t.Fatalf("purge: %d, want 3 deleted: %s", resp.StatusCode, body)
	}
	if s := fx.logStart(t); s != 3 {
		t.Errorf("log start %d after the purge, want 3 (the letter at 3 was never redriven)", s)
	}
	// Again: nothing more goes.
	if resp, body := b.do("POST", job+"/purge", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "below": {"0:3"}}, operator, nil); resp.StatusCode != 200 || !strings.Contains(body, `id="deleted">0<`) {
		t.Errorf("second purge: %d: %s", resp.StatusCode, body)
	}
	if s := fx.logStart(t); s != 3 {
		t.Errorf("log start %d after the second purge, want 3", s)
	}

	a := fx.h.Audit() // newest first
	want := []struct {
		who    string
		status int
		result string
	}{
		{"operator@example.com", 200, "nothing deleted"},
		{"operator@example.com", 200, "deleted 3 letters of " + fx.dlq + " (partition 0 below 3)"},
		{"operator@example.com", 400, "failed: a purge needs its confirmation"},
		{"viewer@example.com", 403, "refused: the viewer role may not act"},
	}
	if len(a) < len(want) {
		t.Fatalf("audit log %+v: want the %d purges", a, len(want))
	}
	for i, w := range want {
		e := a[i]
		if e.Action != "purge" || e.Who != w.who || e.Status != w.status || !strings.HasPrefix(e.Result, w.result) || !strings.Contains(e.Target, "redrive "+strings.TrimPrefix(job, "/ui/jobs/")) {
			t.Errorf("audit[%d] = %+v, want purge by %s: %d %s", i, e, w.who, w.status, w.result)
		}
	}
	if !strings.Contains(a[1].Target, "below 0:6") {
		t.Errorf("the purge's target %q does not say what the form asked", a[1].Target)
	}
}

// TestIntegrationPurgeRelativeUntil: a redrive whose until is relative to
// when it ran cannot be purged: a run at another time passed over letters
// it selects.
func TestIntegrationPurgeRelativeUntil(t *testing.T) {
	fx := newPurgeFixture(t)
	job := fx.redrive(t, url.Values{"until": {"1s"}})
	if page := fx.waitDone(t, job); !strings.Contains(page, `id="no-purge"`) || strings.Contains(page, `id="purge-redriven"`) {
		t.Errorf("the redrive's page offers a purge: %s", page)
	}
	resp, body := fx.b.do("GET", job+"/purge", nil, nil, bearer)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "relative to when it ran") {
		t.Errorf("purge of a relative until: %d, want 409: %s", resp.StatusCode, body)
	}
	resp, _ = fx.b.do("POST", job+"/purge", url.Values{"confirm": {"yes"}, "below": {"0:6"}}, nil, bearer)
	if resp.StatusCode != http.StatusConflict || fx.logStart(t) != 0 {
		t.Errorf("POST purge of a relative until: %d, log start %d", resp.StatusCode, fx.logStart(t))
	}
}

// TestIntegrationPurgeRelativeSince: the purge of a redrive with a relative
// since resolves it when the purge runs. A letter that came after the
// redrive, and that a later run of the same redrive group passed over as
// too old, is never taken for redriven (resolved at the first run's start,
// the since would select it, and the purge would delete it).
func TestIntegrationPurgeRelativeSince(t *testing.T) {
	fx := newPurgeFixture(t)
	first := fx.redrive(t, url.Values{"since": {"1h"}})
	fx.waitDone(t, first)
	// A letter in the first run's window, an hour and two seconds old
	// from the end of that run: too old for a run from two seconds on.
	ended := time.Now()
	f := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: deadletter.ReasonPermanent, Class: "permanent", Message: "negative amount", Topic: "orders", Offset: 6}
	kafkatest.Produce(t, fx.cl, &kgo.Record{Topic: fx.dlq, Value: []byte("late letter"), Timestamp: ended.Add(-time.Hour + 2*time.Second),
		Headers: kafkatest.Headers(f.AppendHeaders(nil))})
	time.Sleep(time.Until(ended.Add(3 * time.Second)))
	second := fx.redrive(t, url.Values{"since": {"1h"}})
	if page := fx.waitDone(t, second); !strings.Contains(page, `class="done"`) {
		t.Fatalf("the second run: %s", page)
	}
	_, body := fx.b.do("GET", first+"/purge", nil, nil, bearer)
	for _, want := range []string{"<td>0 to 5</td>", `letters/0/6">0:6</a>`, "the redrive passed over it", `name="below" value="0:6"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the first run's purge plan lacks %q:\n%s", want, body)
		}
	}
}
