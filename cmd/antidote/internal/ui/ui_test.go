package ui

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// TestIntegrationUI: antidote ui serves the console on loopback with the
// token of the environment; a letter whose value is Avro is shown decoded
// through the registry; ctx ending stops it with exit 0.
func TestIntegrationUI(t *testing.T) {
	t.Setenv(admin.EnvToken, "ui-token")
	c := kafkatest.New(t)
	dlq := c.Topic(t, "ui.dlq", 1)
	srv := srtest.New(t)
	reg, err := registry.New(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := reg.Register(ctx, kafkatest.UniqueName("orders")+"-value", sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := avro.Marshal(avro.MustParse(schema), map[string]any{"id": int64(7), "item": "<b>widget</b>"})
	if err != nil {
		t.Fatal(err)
	}
	value := append([]byte{0}, binary.BigEndian.AppendUint32(nil, uint32(id))...)
	value = append(value, payload...)
	f := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: deadletter.ReasonPermanent, Class: "permanent", Message: "rejected", Topic: "orders", Offset: 3}
	var hs []kgo.RecordHeader
	for _, h := range f.AppendHeaders(nil) {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if err := c.Client(t).ProduceSync(ctx, &kgo.Record{Topic: dlq, Value: value, Headers: hs}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var out clitest.SyncBuffer
	rctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- runContext(rctx, []string{"ui", "--brokers", strings.Join(c.Brokers(), ","), "--listen", "127.0.0.1:0", "--topic", dlq, "--registry", srv.URL()}, &out, io.Discard)
	}()
	re := regexp.MustCompile(`antidote console at (http://127\.0\.0\.1:\d+/) \(token from ` + admin.EnvToken + `\)`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("antidote ui ended (%d) before serving: %s", code, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("antidote ui printed no address: %q", out.String())
		}
	}
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("", ""); code != http.StatusSeeOther {
		t.Errorf("without the token: %d, want 303 to the login page", code)
	}
	if code, body := get("", "ui-token"); code != 200 || !strings.Contains(body, dlq) {
		t.Errorf("topic list: %d, %s", code, body)
	}
	code, body := get("topics/"+dlq+"/letters/0/0", "ui-token")
	if code != 200 || !strings.Contains(body, `&#34;item&#34;: &#34;&lt;b&gt;widget&lt;/b&gt;&#34;`) {
		t.Errorf("the Avro value is not shown decoded (and escaped): %d %s", code, body)
	}
	stop()
	select {
	case code := <-done:
		if code != cli.ExitOK && code != cli.ExitInterrupted {
			t.Errorf("exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("antidote ui did not stop")
	}
}

// TestUIRefusesRemote: an address other than loopback without TLS is
// refused, with what to do; so is half a certificate.
func TestUIRefusesRemote(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:9190"},
		{"--listen", "192.0.2.1:9190"},
		{"--listen", "0.0.0.0:9190", "--https-cert", "console.pem"},
	} {
		var errOut strings.Builder
		code := runContext(context.Background(), append([]string{"ui"}, args...), io.Discard, &errOut)
		if code != cli.ExitUsage || !strings.Contains(errOut.String(), "--https-cert") || !strings.Contains(errOut.String(), "--https-key") {
			t.Errorf("%v: exit %d: %s", args, code, errOut.String())
		}
	}
}

// TestUIOIDCFlags: a login through a provider needs a client and roles.
func TestUIOIDCFlags(t *testing.T) {
	c := kafkatest.New(t)
	for args, want := range map[string]string{
		"--oidc-issuer http://127.0.0.1:1":                                     "--oidc-client-id",
		"--oidc-issuer http://127.0.0.1:1 --oidc-client-id a":                  "--oidc-operators or --oidc-viewers",
		"--oidc-issuer http://127.0.0.1:1 --oidc-client-id a --oidc-viewers *": "--oidc-issuer http://127.0.0.1:1: oidc: provider",
	} {
		var errOut strings.Builder
		code := runContext(context.Background(), append([]string{"ui", "--brokers", strings.Join(c.Brokers(), ","), "--listen", "127.0.0.1:0"}, strings.Fields(args)...), io.Discard, &errOut)
		if code == cli.ExitOK || !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: exit %d: %s; want %q", args, code, errOut.String(), want)
		}
	}
}

// TestIntegrationUITLS: with a certificate, antidote ui serves the console
// over TLS on an address other than loopback; a client that trusts the
// test CA logs in, and plain HTTP gets nothing of the console.
func TestIntegrationUITLS(t *testing.T) {
	c := kafkatest.New(t)
	ca := kafkatest.NewCA(t)
	certFile, keyFile := ca.Issue(t, "localhost", "127.0.0.1")
	var out clitest.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"ui", "--brokers", strings.Join(c.Brokers(), ","), "--listen", "0.0.0.0:0",
			"--https-cert", certFile, "--https-key", keyFile, "--token", "tls-token"}, &out, io.Discard)
	}()
	defer func() { stop(); <-done }()
	re := regexp.MustCompile(`antidote console at https://\S+:(\d+)/ `)
	clitest.WaitFor(t, 30*time.Second, "antidote ui to print its address", func() bool { return re.MatchString(out.String()) }, out.String)
	port := re.FindStringSubmatch(out.String())[1]
	cl := &http.Client{Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.PostForm("https://127.0.0.1:"+port+"/login", url.Values{"token": {"tls-token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 || !resp.Cookies()[0].Secure {
		t.Errorf("login over TLS: %d, cookies %v; want 303 and a Secure cookie", resp.StatusCode, resp.Cookies())
	}
	// An untrusting client fails the handshake: the certificate is the
	// test CA's.
	if _, err := http.Get("https://127.0.0.1:" + port + "/login"); err == nil {
		t.Error("a client without the test CA completed the handshake")
	}
	plain, err := http.Get("http://127.0.0.1:" + port + "/login")
	if err == nil {
		b, _ := io.ReadAll(plain.Body)
		plain.Body.Close()
		if plain.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "token") {
			t.Errorf("plain HTTP on the TLS port: %d %s", plain.StatusCode, b)
		}
	}
}

// TestIntegrationUIToken: --token is the token of the login page, and it
// wins over the environment's.
func TestIntegrationUIToken(t *testing.T) {
	t.Setenv(admin.EnvToken, "env-token")
	c := kafkatest.New(t)
	var out clitest.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"ui", "--brokers", strings.Join(c.Brokers(), ","), "--listen", "127.0.0.1:0", "--token", "flag-token"}, &out, io.Discard)
	}()
	defer func() { stop(); <-done }()
	re := regexp.MustCompile(`antidote console at (http://127\.0\.0\.1:\d+/) \(token from --token\)`)
	clitest.WaitFor(t, 30*time.Second, "antidote ui to print its address", func() bool { return re.MatchString(out.String()) }, out.String)
	base := re.FindStringSubmatch(out.String())[1]
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for tok, want := range map[string]int{"flag-token": http.StatusSeeOther, "env-token": http.StatusUnauthorized} {
		resp, err := cl.PostForm(base+"login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("login with %s: %d, want %d", tok, resp.StatusCode, want)
		}
	}
}
