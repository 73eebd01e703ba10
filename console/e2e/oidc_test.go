package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/console/oidc"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// The environment of a real OpenID provider: scripts/dex.sh env prints it.
const (
	envOIDCIssuer  = "ANTIDOTE_OIDC_ISSUER"  // the provider's issuer URL
	envOIDCConsole = "ANTIDOTE_OIDC_CONSOLE" // the console URL its client sends browsers back to
)

// TestIntegrationConsoleOIDC: the console over TLS logs in through a real
// OpenID provider (Dex, from scripts/dex.sh) in Chromium, by its login
// form: the viewer reads, sees the actions greyed, and is refused one
// (403, and the refusal is audited); the operator pauses a partition, and
// the pause is on the audit page with who did it.
func TestIntegrationConsoleOIDC(t *testing.T) {
	issuer, base := os.Getenv(envOIDCIssuer), os.Getenv(envOIDCConsole)
	if issuer == "" || base == "" {
		t.Skipf("%s and %s are not set: start a provider with scripts/dex.sh start and eval \"$(scripts/dex.sh env)\"", envOIDCIssuer, envOIDCConsole)
	}
	cu, err := url.Parse(base)
	if err != nil || cu.Scheme != "https" {
		t.Fatalf("%s=%q: want the https URL of the console", envOIDCConsole, base)
	}
	c := kafkatest.New(t)
	topic := c.Topic(t, "oidc", 1)
	kafkatest.Produce(t, c.Client(t), &kgo.Record{Topic: topic, Value: []byte("ok")})
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"), Value: serde.String(),
		Handler:    func(context.Context, *consumer.Record[string, string]) error { return nil },
		Logger:     kafkatest.Logger(t),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	})
	kafkatest.WaitFor(t, 60*time.Second, "the partition assigned", func() bool { return len(cons.Stats().Partitions) == 1 })

	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer lcancel()
	login, err := oidc.New(lctx, oidc.Config{
		Issuer: issuer, ClientID: "antidote", ClientSecret: "antidote-test-secret",
		Operators: []string{"kafka-oncall"}, Viewers: []string{"kafka-dev"}, Label: "Log in with Dex",
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t),
		Consumers: map[string]admin.Consumer{"orders": cons}, Prefix: cu.Path, URL: base, Login: login,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)

	// The console over TLS, with a certificate of a CA of this test, on
	// the address the provider's client knows.
	ca := kafkatest.NewCA(t)
	srvTLS := ca.ServerTLS(t, cu.Hostname())
	// The port is fixed (the provider's client knows it) but within the
	// ephemeral range: an outgoing connection of this machine may hold it
	// for a moment.
	var ln net.Listener
	kafkatest.WaitFor(t, 30*time.Second, "the console's address "+cu.Host+" (the provider's client sends browsers there) to be free", func() bool {
		ln, err = net.Listen("tcp", cu.Host)
		return err == nil
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, srvTLS)) }()
	t.Cleanup(func() { _ = srv.Close() })
	// Chromium trusts the console's key, and no other.
	leaf, err := x509.ParseCertificate(srvTLS.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	trust := chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:]))
	start := base + "consumers/orders"

	// The viewer.
	viewer := browse(t, strings.TrimSuffix(base, "/"), trust)
	viewer.run(t, "the login page",
		chromedp.Navigate(start),
		chromedp.WaitVisible("#login-oidc", chromedp.ByID),
	)
	contains(t, "login button", viewer.text(t, "#login-oidc"), "Log in with Dex")
	viewer.screenshot(t, "oidc-login-choice")
	viewer.providerLogin(t, "viewer@example.com")
	contains(t, "who", viewer.text(t, "#whoami"), "viewer@example.com (viewer)")
	contains(t, "viewer's note", viewer.text(t, "#viewer-note"), "viewer")
	var disabled bool
	viewer.run(t, "greyed", chromedp.Evaluate(`document.querySelector("button.pause").disabled`, &disabled))
	if !disabled {
		t.Error("the viewer's Pause button is enabled")
	}
	viewer.screenshot(t, "oidc-viewer-consumer")
	// A viewer who enables the button by hand is refused by the server.
	viewer.run(t, "pause as a viewer",
		chromedp.Evaluate(`document.querySelector("button.pause").disabled = false`, nil),
		chromedp.Click("button.pause", chromedp.ByQuery),
		chromedp.WaitVisible("#error", chromedp.ByID),
	)
	page := viewer.text(t, "main")
	contains(t, "refusal", page, "403")
	contains(t, "refusal", page, "viewer@example.com is a viewer, and pause is an operator's action")
	viewer.screenshot(t, "oidc-viewer-refused")
	if st := cons.Stats(); st.Partitions[0].Paused != "" {
		t.Fatalf("the viewer paused the partition: %+v", st.Partitions[0])
	}

	// The operator.
	op := browse(t, strings.TrimSuffix(base, "/"), trust)
	op.run(t, "the login page", chromedp.Navigate(start), chromedp.WaitVisible("#login-oidc", chromedp.ByID))
	op.providerLogin(t, "operator@example.com")
	contains(t, "who", op.text(t, "#whoami"), "operator@example.com (operator)")
	op.run(t, "pause", chromedp.Click("button.pause", chromedp.ByQuery), chromedp.WaitVisible("#message", chromedp.ByID))
	contains(t, "after pause", op.text(t, "#message"), "paused")
	kafkatest.WaitFor(t, 30*time.Second, "the partition paused", func() bool {
		return cons.Stats().Partitions[0].Paused == consumer.PauseOperator
	})
	op.run(t, "audit page", chromedp.Click("#audit-link", chromedp.ByID), chromedp.WaitVisible("#audit", chromedp.ByID))
	rows := op.text(t, "#audit tbody")
	contains(t, "audit", rows, "operator@example.com")
	contains(t, "audit", rows, "viewer@example.com")
	contains(t, "audit", rows, "refused")
	first := op.text(t, "#audit tbody tr")
	for _, want := range []string{"operator@example.com", "operator", "pause", "topic " + topic, "303 ok"} {
		contains(t, "the newest audit entry", first, want)
	}
	op.screenshot(t, "oidc-audit")
	if a := h.Audit(); len(a) != 2 || a[0].Who != "operator@example.com" || a[0].Result != "ok" || a[1].Who != "viewer@example.com" || a[1].Status != http.StatusForbidden {
		t.Errorf("audit log %+v", a)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal("the consumer ended early")
	}
}

// providerLogin presses the console's button of the provider, fills the
// provider's own login form (Dex's) and comes back logged in.
func (tb *tab) providerLogin(t *testing.T, user string) {
	t.Helper()
	tb.step(t, "the provider's login form", chromedp.Click("#login-oidc", chromedp.ByID), chromedp.WaitVisible("#password", chromedp.ByID))
	tb.screenshot(t, "oidc-provider-form")
	// The provider's form is filled and sent in one script, in the page:
	// right after the cross-origin navigation to the provider, Chromium may
	// still replace the document chromedp has node ids of ("Could not find
	// node with given id"); a script holds no node ids.
	fill := fmt.Sprintf(`(() => {
		document.querySelector("#login").value = %q;
		document.querySelector("#password").value = "password";
		document.querySelector("#submit-login").click();
		return true;
	})()`, user)
	tb.step(t, "log in at the provider as "+user,
		chromedp.WaitVisible("#submit-login", chromedp.ByID),
		chromedp.Evaluate(fill, nil),
		chromedp.WaitVisible("#whoami", chromedp.ByID),
	)
}

// step runs actions within 45 seconds, and says where the browser was
// when they did not finish.
func (tb *tab) step(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, body string
		_ = chromedp.Run(tb.ctx, chromedp.Location(&loc), chromedp.Text("body", &body, chromedp.ByQuery))
		t.Fatalf("%s: %v (at %s; page text %q)", what, err, loc, clip(body, 2000))
	}
}
