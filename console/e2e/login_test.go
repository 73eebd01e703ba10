package e2e

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationConsoleLoginRedirect: a login link whose next= would
// send Chromium to another site (a TAB it drops, or "//host") leaves it on
// the console.
func TestIntegrationConsoleLoginRedirect(t *testing.T) {
	c := kafkatest.New(t)
	h, err := console.New(console.Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	tb := newTab(t, h, "")
	for _, next := range []string{"/%09/evil.example/", "//evil.example/", "/%5C/evil.example/"} {
		var loc string
		tb.run(t, "login with next="+next,
			chromedp.Navigate(tb.base+"/login?next="+next),
			chromedp.WaitVisible("#token", chromedp.ByID),
			chromedp.SendKeys("#token", token, chromedp.ByID),
			chromedp.Click("#login", chromedp.ByID),
			chromedp.WaitVisible("#topics", chromedp.ByID),
			chromedp.Location(&loc),
		)
		u, err := url.Parse(loc)
		base, _ := url.Parse(tb.base)
		if err != nil || u.Host != base.Host || strings.Contains(loc, "evil") {
			t.Errorf("after a login with next=%s the browser is at %q, want the console at %s", next, loc, tb.base)
		}
		tb.run(t, "log out", chromedp.Click("#logout", chromedp.ByID), chromedp.WaitVisible("#token", chromedp.ByID))
	}
}
