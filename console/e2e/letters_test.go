package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

type order struct {
	ID     int     `json:"id"`
	Amount float64 `json:"amount"`
}

// The XSS payloads: a script, an image whose onerror runs script, and an
// attribute breaker. Each would set window.__xss and open a dialog.
const (
	xssScript = `<script>window.__xss=1;alert("script")</script>`
	xssImg    = `<img src=x onerror="window.__xss=2;alert('img')">`
	xssAttr   = `"><svg onload="window.__xss=3;alert(3)">`
)

// poisoned is a source topic whose poison pills a real Antidote consumer
// dead-lettered into its dead-letter topic.
type poisoned struct {
	cluster  *kafkatest.Cluster
	cl       *kgo.Client
	src, dlq string
	// rejected counts the orders the handler rejected (negative
	// amounts); garbage counts the records that are no JSON.
	rejected, garbage int
}

// fill produces orders with poison pills mixed in to a new topic and runs
// the consumer over them until every poison pill is dead-lettered; the
// consumer is stopped before fill returns.
func fill(t *testing.T) *poisoned {
	t.Helper()
	c := kafkatest.New(t)
	p := &poisoned{cluster: c, src: c.Topic(t, "orders", 2)}
	p.dlq = p.src + ".dlq"
	p.cl = c.Client(t, kgo.ProducerLinger(0), kgo.FetchMaxWait(200*time.Millisecond))
	t.Cleanup(func() { deleteTopic(p.cl, p.dlq) })
	var rs []*kgo.Record
	for i := range 60 {
		v := fmt.Sprintf(`{"id":%d,"amount":%d}`, i, 10+i)
		switch {
		case i%10 == 3:
			v = fmt.Sprintf(`{"id":%d,"amount":-%d}`, i, i)
			p.rejected++
		case i%10 == 7:
			v = "\x00\x01garbage\xff\xfe"
			p.garbage++
		}
		rs = append(rs, &kgo.Record{Topic: p.src, Key: []byte("order-" + strconv.Itoa(i)), Value: []byte(v)})
	}
	// Hostile contents: markup in the value, the key and the headers;
	// ANSI escapes and bytes that are not UTF-8.
	rs = append(rs,
		&kgo.Record{Topic: p.src, Key: []byte(xssAttr), Value: []byte(xssScript + xssImg),
			Headers: []kgo.RecordHeader{{Key: "note", Value: []byte(xssImg)}, {Key: xssScript, Value: []byte(xssAttr)}}},
		&kgo.Record{Topic: p.src, Key: []byte("ansi"), Value: []byte("\x1b[31mred\x1b[0m \xc3\x28 tail")},
	)
	p.garbage += 2
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := consumer.New(consumer.Config[string, order]{
		Brokers: c.Brokers(), Topics: []string{p.src}, Group: kafkatest.UniqueName("fill"),
		Key: serde.String(), Value: serde.JSON[order](),
		Handler: func(_ context.Context, r *consumer.Record[string, order]) error {
			if r.Value.Amount < 0 {
				return failure.Permanent(errors.New("negative amount"))
			}
			return nil
		},
		Logger: kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(rctx) }()
	want := uint64(p.rejected + p.garbage)
	kafkatest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d dead letters", want), func() bool { return cons.Stats().DeadLettered >= want })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := cons.Stats().DeadLettered; got != want {
		t.Fatalf("dead-lettered %d, want %d", got, want)
	}
	t.Logf("%s: %d dead letters in %s (%d rejected, %d unreadable)", c.Kind(), want, p.dlq, p.rejected, p.garbage)
	return p
}

func deleteTopic(cl *kgo.Client, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topic)
}

func newConsole(t *testing.T, p *poisoned, cfg console.Config) *console.Handler {
	t.Helper()
	cfg.ClientOpts = []kgo.Opt{kgo.SeedBrokers(p.cluster.Brokers()...)}
	cfg.Token = token
	cfg.Logger = kafkatest.Logger(t)
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// redriven reads the source topic and counts the records a redrive
// re-produced (those with a redrive count header).
func (p *poisoned) redriven(t *testing.T) (n int, values []string) {
	t.Helper()
	cl := p.cluster.Client(t, deadletter.ScanOpts()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: p.src, IdleTimeout: 5 * time.Second}, func(r *kgo.Record) error {
		for _, h := range r.Headers {
			if h.Key == deadletter.HeaderRedriveCount {
				n++
				values = append(values, string(r.Value))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, values
}

// TestIntegrationConsoleLetters: the topic list, the table filtered by
// reason, one letter in plain words, a redrive dry run, then a real
// redrive whose records are counted in Kafka.
func TestIntegrationConsoleLetters(t *testing.T) {
	p := fill(t)
	h := newConsole(t, p, console.Config{Topics: []string{p.dlq}, PageSize: 5})
	tb := newTab(t, h, "")
	tb.login(t)
	total := p.rejected + p.garbage
	topics := tb.text(t, "#topics")
	contains(t, "topic list", topics, p.dlq)
	contains(t, "topic list", topics, strconv.Itoa(total))
	tb.screenshot(t, "topics")

	tb.run(t, "open the topic",
		chromedp.Click(`//a[text()="`+p.dlq+`"]`, chromedp.BySearch),
		chromedp.WaitVisible("#letters", chromedp.ByID),
	)
	if got := tb.text(t, "#total"); got != strconv.Itoa(total) {
		t.Errorf("total %q, want %d", got, total)
	}
	var rows int
	tb.run(t, "count rows", chromedp.Evaluate(`document.querySelectorAll("#letters input.pick").length`, &rows))
	if rows != 5 {
		t.Errorf("first page: %d rows, want 5 (the page size)", rows)
	}
	tb.run(t, "chart", chromedp.WaitVisible("#chart svg rect", chromedp.ByQuery))
	tb.screenshot(t, "topic")
	// The pages together hold every letter once.
	seen := map[string]bool{}
	for page := 0; ; page++ {
		var ids []string
		tb.run(t, "read page", chromedp.Evaluate(`Array.from(document.querySelectorAll("#letters input.pick")).map(e => e.value)`, &ids))
		for _, id := range ids {
			if seen[id] {
				t.Errorf("letter %s on two pages", id)
			}
			seen[id] = true
		}
		var more bool
		tb.run(t, "next?", chromedp.Evaluate(`document.getElementById("next") !== null`, &more))
		if !more || page > 10 {
			break
		}
		tb.run(t, "next page", chromedp.Click("#next", chromedp.ByID), chromedp.WaitVisible("#first", chromedp.ByID))
	}
	if len(seen) != total {
		t.Errorf("the pages list %d letters, want %d", len(seen), total)
	}

	// Filter by reason: the handler's rejections, on the topic opened by
	// its name.
	tb.run(t, "filter",
		chromedp.Navigate(tb.base+"/"),
		chromedp.WaitVisible("#topic-name", chromedp.ByID),
		chromedp.SendKeys("#topic-name", p.dlq, chromedp.ByID),
		chromedp.Click("#open-topic", chromedp.ByID),
		chromedp.WaitVisible("#reason", chromedp.ByID),
		chromedp.SendKeys("#reason", "negative amount", chromedp.ByID),
		chromedp.Click("#apply", chromedp.ByID),
		chromedp.WaitVisible(`#reason[value="negative amount"]`, chromedp.ByQuery),
	)
	if got := tb.text(t, "#total"); got != strconv.Itoa(p.rejected) {
		t.Errorf("filtered total %q, want %d", got, p.rejected)
	}
	var stages []string
	tb.run(t, "stages", chromedp.Evaluate(`Array.from(document.querySelectorAll("#letters tbody tr td:nth-child(6)")).map(e => e.textContent)`, &stages))
	if len(stages) != min(p.rejected, 5) {
		t.Errorf("filtered table: %d rows, want %d", len(stages), p.rejected)
	}
	for _, s := range stages {
		if s != "process" {
			t.Errorf("filtered letter of stage %q, want process", s)
		}
	}

	// One letter, in plain words.
	tb.run(t, "open a letter", chromedp.Click("#letters a.open", chromedp.ByQuery), chromedp.WaitVisible("#failure", chromedp.ByID))
	failureText := tb.text(t, "#failure")
	contains(t, "failure", failureText, "negative amount")
	contains(t, "failure", failureText, "the handler failed on the record")
	contains(t, "failure", failureText, "retrying cannot help")
	contains(t, "origin", tb.text(t, "#origin"), p.src)
	contains(t, "dialect", tb.text(t, "#dialect"), "Antidote")
	contains(t, "value", tb.text(t, "#value pre"), `"amount": -`)
	tb.screenshot(t, "letter")
	tb.run(t, "redrive this letter", chromedp.Click("#redrive-one", chromedp.ByID), chromedp.WaitVisible("#dry-result", chromedp.ByID))
	if got := tb.text(t, "#would"); got != "1" {
		t.Errorf("dry run of one letter: %q would be redriven, want 1", got)
	}
	if n, _ := p.redriven(t); n != 0 {
		t.Fatalf("%d records redriven before any redrive", n)
	}

	// A dry run of two letters picked in the table.
	tb.run(t, "pick two",
		chromedp.Navigate(tb.base+"/topics/"+p.dlq),
		chromedp.WaitVisible("#letters", chromedp.ByID),
		chromedp.Click(`#letters tbody tr:nth-child(1) input.pick`, chromedp.ByQuery),
		chromedp.Click(`#letters tbody tr:nth-child(2) input.pick`, chromedp.ByQuery),
		chromedp.Click("#redrive-picked", chromedp.ByID),
		chromedp.WaitVisible("#dry-result", chromedp.ByID),
	)
	if got := tb.text(t, "#would"); got != "2" {
		t.Errorf("dry run of two picked letters: %q would be redriven, want 2", got)
	}
	// "Pick every letter of this page" ticks the page's letters.
	var ticked int
	tb.run(t, "pick all",
		chromedp.Navigate(tb.base+"/topics/"+p.dlq),
		chromedp.WaitVisible("#all", chromedp.ByID),
		chromedp.Click("#all", chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll("#letters input.pick:checked").length`, &ticked),
	)
	if ticked != 5 {
		t.Errorf("pick all ticked %d letters, want the page's 5", ticked)
	}

	// Dry run of the filter, then the redrive.
	tb.run(t, "dry run",
		chromedp.Navigate(tb.base+"/topics/"+p.dlq+"?reason=negative+amount"),
		chromedp.WaitVisible("#redrive-filter", chromedp.ByID),
		chromedp.Click("#redrive-filter", chromedp.ByID),
		chromedp.WaitVisible("#dry-result", chromedp.ByID),
	)
	if got := tb.text(t, "#would"); got != strconv.Itoa(p.rejected) {
		t.Errorf("dry run: %q would be redriven, want %d", got, p.rejected)
	}
	tb.screenshot(t, "dryrun")
	if n, _ := p.redriven(t); n != 0 {
		t.Fatalf("the dry run produced %d records", n)
	}
	tb.run(t, "redrive",
		chromedp.Click("#confirm", chromedp.ByID),
		chromedp.Click("#run", chromedp.ByID),
		chromedp.WaitVisible("#state.done", chromedp.ByQuery),
	)
	if got := tb.text(t, "#redriven"); got != strconv.Itoa(p.rejected) {
		t.Errorf("redrive page: %q redriven, want %d", got, p.rejected)
	}
	n, values := p.redriven(t)
	if n != p.rejected {
		t.Errorf("the source topic holds %d redriven records, want %d", n, p.rejected)
	}
	for _, v := range values {
		if !strings.Contains(v, `"amount":-`) {
			t.Errorf("redriven %q, not a rejected order", v)
		}
	}
	// The same redrive again resumes: nothing is left to redrive.
	tb.run(t, "dry run again",
		chromedp.Navigate(tb.base+"/topics/"+p.dlq+"?reason=negative+amount"),
		chromedp.WaitVisible("#redrive-filter", chromedp.ByID),
		chromedp.Click("#redrive-filter", chromedp.ByID),
		chromedp.WaitVisible("#dry-result", chromedp.ByID),
	)
	if got := tb.text(t, "#would"); got != "0" {
		t.Errorf("second dry run: %q would be redriven, want 0 (the progress is committed)", got)
	}

	// A redrive stopped while it runs: it holds on a fetch that the
	// cluster keeps waiting until the stop.
	if fake := p.cluster.Fake(); fake != nil {
		tb.run(t, "dry run of the unreadable letters",
			chromedp.Navigate(tb.base+"/topics/"+p.dlq+"?stage=deserialize-value"),
			chromedp.WaitVisible("#redrive-filter", chromedp.ByID),
			chromedp.Click("#redrive-filter", chromedp.ByID),
			chromedp.WaitVisible("#dry-result", chromedp.ByID),
		)
		release := make(chan struct{})
		var held atomic.Int32
		fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			select {
			case <-release:
				fake.DropControl()
			default:
				held.Add(1)
				fake.SleepControl(func() { <-release })
			}
			return nil, nil, false
		})
		released := sync.OnceFunc(func() { close(release) })
		t.Cleanup(released)
		tb.run(t, "start the redrive",
			chromedp.Click("#confirm", chromedp.ByID),
			chromedp.Click("#run", chromedp.ByID),
			chromedp.WaitVisible("#stop", chromedp.ByID),
		)
		kafkatest.WaitFor(t, 30*time.Second, "the redrive's fetch held", func() bool { return held.Load() > 0 })
		tb.run(t, "stop the redrive", chromedp.Click("#stop", chromedp.ByID), chromedp.WaitVisible("#state.failed", chromedp.ByQuery))
		released()
		contains(t, "stopped redrive", tb.text(t, "#state"), "stopped")
		if got := tb.text(t, "#redriven"); got != "0" {
			t.Errorf("the stopped redrive redrove %s letters, want 0", got)
		}
		if n, _ := p.redriven(t); n != p.rejected {
			t.Errorf("after the stopped redrive the source topic holds %d redriven records, want %d", n, p.rejected)
		}
	}

	// Log out: the console asks for the token again.
	tb.run(t, "log out",
		chromedp.Navigate(tb.base+"/"),
		chromedp.WaitVisible("#logout", chromedp.ByID),
		chromedp.Click("#logout", chromedp.ByID),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.Navigate(tb.base+"/topics/"+p.dlq),
		chromedp.WaitVisible("#token", chromedp.ByID),
	)
	if d := tb.dialogs.Load(); d != 0 {
		t.Errorf("%d dialogs opened", d)
	}
}

// TestIntegrationConsoleXSS: a poison pill whose value, key and headers
// hold markup is listed and opened, and none of it runs.
func TestIntegrationConsoleXSS(t *testing.T) {
	p := fill(t)
	h := newConsole(t, p, console.Config{Topics: []string{p.dlq}, PageSize: 100})
	tb := newTab(t, h, "")
	tb.login(t)
	tb.run(t, "list", chromedp.Navigate(tb.base+"/topics/"+p.dlq), chromedp.WaitVisible("#letters", chromedp.ByID))
	table := tb.text(t, "#letters")
	contains(t, "table", table, `"><svg onload=`) // the key, as text
	noScript(t, tb, "the table")

	// Open the letter whose key is the attribute breaker.
	var href string
	tb.run(t, "find the letter", chromedp.Evaluate(`(function(){
		for (const tr of document.querySelectorAll("#letters tbody tr")) {
			if (tr.querySelector("td.key").textContent.includes("svg onload")) return tr.querySelector("a.open").getAttribute("href");
		}
		return "";
	})()`, &href))
	if href == "" {
		t.Fatal("the hostile letter is not listed")
	}
	tb.run(t, "open it", chromedp.Navigate(tb.base+href), chromedp.WaitVisible("#headers", chromedp.ByID))
	value := tb.text(t, "#value pre")
	contains(t, "value shown as text", value, xssScript)
	contains(t, "value shown as text", value, xssImg)
	headers := tb.text(t, "#headers")
	contains(t, "headers shown as text", headers, xssImg)
	contains(t, "headers shown as text", headers, xssScript)
	noScript(t, tb, "the letter")
	tb.run(t, "text view", chromedp.Navigate(tb.base+href+"?as=hex"), chromedp.WaitVisible("#value pre", chromedp.ByQuery))
	noScript(t, tb, "the hex view")

	// ANSI escapes and bytes that are not UTF-8 are shown as escapes.
	tb.run(t, "ansi", chromedp.Navigate(tb.base+"/topics/"+p.dlq+"?key=ansi"), chromedp.WaitVisible("#letters a.open", chromedp.ByQuery),
		chromedp.Click("#letters a.open", chromedp.ByQuery), chromedp.WaitVisible("#value", chromedp.ByID))
	tb.run(t, "ansi as text", chromedp.Navigate(currentPath(t, tb)+"?as=text"), chromedp.WaitVisible("#value pre", chromedp.ByQuery))
	ansi := tb.text(t, "#value pre")
	contains(t, "ANSI as escapes", ansi, `\x1b[31mred\x1b[0m \xc3( tail`)
}

func currentPath(t *testing.T, tb *tab) string {
	var loc string
	tb.run(t, "location", chromedp.Location(&loc))
	if i := strings.IndexByte(loc, '?'); i >= 0 {
		loc = loc[:i]
	}
	return loc
}

// noScript checks that no payload ran: no dialog, no global, no element
// the markup would have made.
func noScript(t *testing.T, tb *tab, where string) {
	t.Helper()
	var xss string
	var imgs, svgs, scripts int
	tb.run(t, "probe "+where,
		chromedp.Evaluate(`typeof window.__xss`, &xss),
		chromedp.Evaluate(`document.querySelectorAll("img").length`, &imgs),
		chromedp.Evaluate(`document.querySelectorAll("main svg[onload], main img, main script").length`, &svgs),
		chromedp.Evaluate(`document.scripts.length`, &scripts),
	)
	if xss != "undefined" {
		t.Errorf("%s: window.__xss is %s: a payload ran", where, xss)
	}
	if imgs != 0 || svgs != 0 {
		t.Errorf("%s: %d img and %d payload elements in the page", where, imgs, svgs)
	}
	if scripts != 1 {
		t.Errorf("%s: %d scripts in the page, want 1 (app.js)", where, scripts)
	}
	if d := tb.dialogs.Load(); d != 0 {
		t.Errorf("%s: %d dialogs opened", where, d)
	}
}
