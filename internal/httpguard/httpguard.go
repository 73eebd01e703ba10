// Package httpguard holds the guards that the admin API and the console
// share: the Host check that defeats DNS rebinding on a loopback listener,
// and the throttle of failed logins.
package httpguard

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ForeignHost reports whether r came in on a loopback listener with a Host
// that is not a loopback name or address: a page of another site that a
// DNS rebinding pointed at this listener. Such a request is answered
// [http.StatusMisdirectedRequest]. A listener on another address serves
// any Host: it was opened on purpose, behind its own guards.
func ForeignHost(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !loopbackAddr(local) {
		return false
	}
	return !LoopbackHost(r.Host)
}

// RemotePlain reports whether r came in over plain HTTP on a listener that
// is not on loopback: a password, a token or a session cookie would cross
// the network in the clear. A request over TLS, or through a proxy that
// terminated TLS and says so (X-Forwarded-Proto: https), is not; nor is a
// request whose listener is unknown (a handler called without a server).
func RemotePlain(r *http.Request) bool {
	if Secure(r) {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && !loopbackAddr(local)
}

// Secure reports whether the browser reached the server over TLS: its
// own, or that of a proxy in front, which says so in X-Forwarded-Proto.
func Secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https")
}

// PlainRefused answers a request that [RemotePlain] refused.
func PlainRefused(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte("403 forbidden: this console is served on an address other than loopback, so over TLS only: open it with https://, " +
		"or serve it with a certificate (antidote ui --https-cert and --https-key; admin.tls in antidote run), " +
		"or behind a proxy that terminates TLS and sends X-Forwarded-Proto: https\n"))
}

func loopbackAddr(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackHost reports whether host (a Host header, with or without a port)
// names this machine's loopback: localhost, a name under .localhost, or a
// loopback address.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Misdirected answers a request of a foreign Host.
func Misdirected(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusMisdirectedRequest)
	_, _ = w.Write([]byte("421 misdirected request: this server answers only to localhost or a loopback address on a loopback listener\n"))
}

// Throttle slows down guessing: each attempt with a credential takes one
// of Burst tries, which come back one per Every; a correct credential gives
// its try back. Without a try left, every attempt is refused (the right
// credential too, so that a refusal tells nothing) until one comes back.
// The zero value is not usable: create it with [NewThrottle].
type Throttle struct {
	mu     sync.Mutex
	burst  float64
	every  time.Duration
	tokens float64
	last   time.Time
	now    func() time.Time
}

// Defaults of a login throttle: ten tries, then one every five seconds.
const (
	DefaultBurst = 10
	DefaultEvery = 5 * time.Second
)

// NewThrottle returns a throttle of burst tries that come back one per
// every, reading the time with now (time.Now when nil).
func NewThrottle(burst int, every time.Duration, now func() time.Time) *Throttle {
	if now == nil {
		now = time.Now
	}
	return &Throttle{burst: float64(burst), every: every, tokens: float64(burst), last: now(), now: now}
}

func (t *Throttle) refill() time.Time {
	now := t.now()
	if d := now.Sub(t.last); d > 0 {
		t.tokens = min(t.burst, t.tokens+float64(d)/float64(t.every))
	}
	t.last = now
	return now
}

// Take takes a try. Without one left, it returns false and how long until
// the next comes back.
func (t *Throttle) Take() (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill()
	if t.tokens < 1 {
		return false, time.Duration((1 - t.tokens) * float64(t.every))
	}
	t.tokens--
	return true, 0
}

// Give gives back the try of a correct credential.
func (t *Throttle) Give() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill()
	t.tokens = min(t.burst, t.tokens+1)
}

// RetryAfter sets the Retry-After header of a 429 for wait.
func RetryAfter(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(int((wait+time.Second-1)/time.Second), 1)))
}
