package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// xssTopic is an original topic of markup: the redrive refuses its
// letter, and the purge's plan shows why.
const xssTopic = `<img src=x onerror="window.__xss=4;alert(4)">`

// TestIntegrationConsolePurge: after a redrive by filter, "Purge
// redriven" shows per partition the letters it deletes and where it
// stops (a letter the filter passed over; one the redrive refused, whose
// markup runs nothing), and the confirmed purge deletes those letters and
// keeps the first one that was not redriven.
func TestIntegrationConsolePurge(t *testing.T) {
	c := kafkatest.New(t)
	p := &poisoned{cluster: c, src: c.Topic(t, "orders", 2)}
	p.dlq = c.Topic(t, "purge.dlq", 2)
	p.cl = c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	letter := func(partition int32, topic, msg string) *kgo.Record {
		f := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: deadletter.ReasonPermanent, Class: "permanent", Message: msg, Topic: topic}
		return &kgo.Record{Topic: p.dlq, Partition: partition, Value: []byte(`{"amount":-1}`), Headers: kafkatest.Headers(f.AppendHeaders(nil))}
	}
	neg := "negative amount"
	kafkatest.Produce(t, p.cl,
		// Partition 0: 0-2 redriven, 3 passed over by the filter, 4-5
		// redriven.
		letter(0, p.src, neg), letter(0, p.src, neg), letter(0, p.src, neg),
		letter(0, p.src, "invalid character 'x'"),
		letter(0, p.src, neg), letter(0, p.src, neg),
		// Partition 1: 0 redriven, 1 refused (no legal original topic),
		// 2 redriven.
		letter(1, p.src, neg), letter(1, xssTopic, neg), letter(1, p.src, neg),
	)
	h := newConsole(t, p, console.Config{Topics: []string{p.dlq}})
	tb := newTab(t, h, "")
	tb.login(t)

	tb.run(t, "redrive by filter",
		chromedp.Navigate(tb.base+"/topics/"+p.dlq+"?reason=negative+amount"),
		chromedp.WaitVisible("#redrive-filter", chromedp.ByID),
		chromedp.Click("#redrive-filter", chromedp.ByID),
		chromedp.WaitVisible("#dry-result", chromedp.ByID),
		chromedp.Click("#confirm", chromedp.ByID),
		chromedp.Click("#run", chromedp.ByID),
		chromedp.WaitVisible("#state.done", chromedp.ByQuery),
	)
	if got := tb.text(t, "#redriven"); got != "7" {
		t.Fatalf("the redrive redrove %s letters, want 7", got)
	}

	tb.run(t, "open the purge's plan",
		chromedp.Click("#purge-redriven", chromedp.ByID),
		chromedp.WaitVisible("#purge-plan", chromedp.ByID),
	)
	if got := tb.text(t, "#to-delete"); got != "4" {
		t.Errorf("the plan deletes %s letters, want 4 (0-2 of partition 0, 0 of partition 1)", got)
	}
	rows := map[string]string{}
	var cells [][]string
	tb.run(t, "read the plan", chromedp.Evaluate(`Array.from(document.querySelectorAll("#purge-plan tbody tr")).map(tr => Array.from(tr.cells).map(td => td.innerText))`, &cells))
	for _, r := range cells {
		rows[r[0]] = strings.Join(r, " | ")
	}
	for part, want := range map[string][]string{
		"0": {"0 to 2 | 3 | 6 | 0:3", "the redrive passed over it"},
		"1": {"0 to 0 | 1 | 3 | 1:1", "the redrive refused it: original topic " + fmt.Sprintf("%q", xssTopic) + " is not a legal topic name"},
	} {
		for _, w := range want {
			contains(t, "the plan of partition "+part, rows[part], w)
		}
	}
	tb.screenshot(t, "purge")
	noScript(t, tb, "the purge's plan")

	tb.run(t, "purge",
		chromedp.Click("#purge-confirm", chromedp.ByID),
		chromedp.Click("#purge", chromedp.ByID),
		chromedp.WaitVisible("#purged", chromedp.ByID),
	)
	if got := tb.text(t, "#deleted"); got != "4" {
		t.Errorf("deleted %s letters, want 4", got)
	}
	noScript(t, tb, "the purge's result")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	starts, _, err := deadletter.Bounds(ctx, p.cl, p.dlq)
	if err != nil {
		t.Fatal(err)
	}
	// The first letter of each partition that was not redriven is kept.
	if starts[0] != 3 || starts[1] != 1 {
		t.Errorf("log starts %v after the purge, want 0:3 and 1:1 (letters never redriven)", starts)
	}
}
