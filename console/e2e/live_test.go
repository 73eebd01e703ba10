package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// movingConsumer is a consumer that processes 10 records a second.
type movingConsumer struct {
	admin.Consumer
	start time.Time
}

func (m *movingConsumer) Stats() consumer.Stats {
	n := uint64(time.Since(m.start) / (100 * time.Millisecond))
	return consumer.Stats{Running: true, Ready: true, Brokers: consumer.BrokerState{Reachable: true}, Consumed: n, Processed: n, DeadLettered: n / 10,
		Partitions: []consumer.Partition{{Topic: "orders", Partition: 0, State: consumer.PartitionFlowing, Lag: int64(1000 - min(n, 1000)), Committed: int64(n)}}}
}

// TestIntegrationConsoleLive: the consumer page's last minutes. "Refresh
// every 2s" makes the page refresh itself, each time with more samples
// and charts of the rates; "Stop refreshing" ends it.
func TestIntegrationConsoleLive(t *testing.T) {
	c := kafkatest.New(t)
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t),
		Consumers: map[string]admin.Consumer{"live": &movingConsumer{start: time.Now()}}, LiveEvery: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	tb := newTab(t, h, "")
	tb.login(t)
	tb.run(t, "consumer page",
		chromedp.Navigate(tb.base+"/consumers/live"),
		chromedp.WaitVisible("#live", chromedp.ByID),
	)
	// From here the page loads itself again every 2s: each step is one
	// evaluation in the page, made again when a reload cut it short.
	if !tb.live(t, `(() => { const a = document.getElementById("live"); if (!a) return false; a.click(); return true })()`) {
		t.Fatal("no Refresh link")
	}
	samples := func() int {
		n, _ := strconv.Atoi(tb.liveText(t, `document.getElementById("live-off") ? document.getElementById("samples").innerText : ""`))
		return n
	}
	first := samples()
	for n, deadline := first, time.Now().Add(60*time.Second); n <= first+1; n = samples() {
		if time.Now().After(deadline) {
			t.Fatalf("the page did not refresh itself: %d samples, then %d", first, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !tb.live(t, `!!document.querySelector('meta[http-equiv="refresh"]')`) {
		t.Error("the live page has no refresh")
	}
	caption := tb.liveText(t, `document.querySelector("#spark-processed figcaption")?.innerText ?? ""`)
	var rate float64
	if _, err := fmt.Sscanf(caption, "processed records/s: %g", &rate); err != nil || rate < 5 || rate > 15 {
		t.Errorf("processed rate %q: want about 10/s", caption)
	}
	if tb.liveText(t, `document.querySelector("#spark-lag polyline")?.getAttribute("points") ?? ""`) == "" {
		t.Error("the lag chart has no line")
	}
	if os.Getenv("ANTIDOTE_SCREENSHOTS") != "" {
		// For docs/console-live.png: charts of a dozen samples, not two.
		for deadline := time.Now().Add(60 * time.Second); samples() < first+12 && time.Now().Before(deadline); {
			time.Sleep(500 * time.Millisecond)
		}
	}
	tb.screenshot(t, "live")
	if !tb.live(t, `(() => { const a = document.getElementById("live-off"); if (!a) return false; a.click(); return true })()`) {
		t.Fatal("no Stop refreshing link")
	}
	if tb.liveText(t, `document.getElementById("live") ? (document.querySelector('meta[http-equiv="refresh"]') ? "refreshing" : "stopped") : ""`) != "stopped" {
		t.Error("the page still refreshes itself after Stop refreshing")
	}
}

// live evaluates a boolean in the page once it has loaded, again when a
// reload cut the evaluation short.
func (tb *tab) live(t *testing.T, js string) bool {
	t.Helper()
	var ok bool
	tb.eval(t, `document.readyState === "complete" ? [`+js+`] : null`, func(raw []any) { ok, _ = raw[0].(bool) })
	return ok
}

// liveText evaluates a string in the page until it is not empty.
func (tb *tab) liveText(t *testing.T, js string) string {
	t.Helper()
	var s string
	tb.eval(t, `(() => { if (document.readyState !== "complete") return null; const v = `+js+`; return v ? [v] : null })()`, func(raw []any) { s, _ = raw[0].(string) })
	return s
}

// eval runs js until it gives an array, within 30s.
func (tb *tab) eval(t *testing.T, js string, got func([]any)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var raw []any
		err := chromedp.Run(tb.ctx, chromedp.Evaluate(js, &raw))
		switch {
		case err == nil && len(raw) > 0:
			got(raw)
			return
		case err != nil && !reloading(err):
			t.Fatalf("%s: %v", js, err)
		case time.Now().After(deadline):
			t.Fatalf("%s: nothing within 30s (last error %v)", js, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reloading reports an evaluation cut short by the page loading again, or
// one that found the page loading (no array yet).
func reloading(err error) bool {
	s := err.Error()
	return strings.Contains(s, "navigated or closed") || strings.Contains(s, "context was destroyed") ||
		strings.Contains(s, "Cannot find context") || strings.Contains(s, "encountered an undefined value") ||
		strings.Contains(s, "encountered a null value") || strings.Contains(s, "unmarshal")
}
