package console_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestConsolePlainRemote: on a listener other than loopback, a request
// over plain HTTP is refused with what to do, the login page too; over
// TLS, or behind a proxy that terminated TLS, the console answers.
func TestConsolePlainRemote(t *testing.T) {
	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 9190}
	serve := func(edit func(*http.Request)) (int, string) {
		r := httptest.NewRequest("GET", "https://console.example/login", nil)
		r.TLS = nil
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(remote)))
		if edit != nil {
			edit(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if code, body := serve(nil); code != http.StatusForbidden || !strings.Contains(body, "TLS") || !strings.Contains(body, "--https-cert") {
		t.Errorf("plain HTTP on %s: %d %q; want 403 saying to serve TLS", remote, code, body)
	}
	if code, _ := serve(func(r *http.Request) { r.TLS = &tls.ConnectionState{} }); code != http.StatusOK {
		t.Errorf("over TLS: %d, want 200", code)
	}
	if code, _ := serve(func(r *http.Request) { r.Header.Set("X-Forwarded-Proto", "https") }); code != http.StatusOK {
		t.Errorf("behind a proxy that terminated TLS: %d, want 200", code)
	}
}

// TestAdminConsoleTLS: the admin API refuses to serve its console on an
// address other than loopback without TLS, and serves it with a
// certificate of the test CA.
func TestAdminConsoleTLS(t *testing.T) {
	con, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Token: token, Prefix: "/ui/",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	cfg := admin.Config{
		Consumers: map[string]admin.Consumer{"orders": &fakeConsumer{stats: consumer.Stats{Running: true}}},
		Token:     token, Console: con, AllowRemote: true, Logger: slog.New(slog.DiscardHandler),
	}
	h, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := h.Listen("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "TLS") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen 0.0.0.0:0 without TLS: %v; want an error that asks for Config.TLS", err)
	}
	ca := kafkatest.NewCA(t)
	cfg.TLS = ca.ServerTLS(t, "127.0.0.1")
	if h, err = admin.New(cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := h.Listen("0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	port := ln.Addr().(*net.TCPAddr).Port
	cl := &http.Client{Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	u := "https://127.0.0.1:" + strconv.Itoa(port) + "/ui/login"
	resp, err := cl.PostForm(u, url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 || !resp.Cookies()[0].Secure {
		t.Errorf("login at %s: %d %s, cookies %v; want 303 and a Secure cookie", u, resp.StatusCode, b, resp.Cookies())
	}
}
