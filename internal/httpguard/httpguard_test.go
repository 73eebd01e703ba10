package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestForeignHost(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9180}
	lan := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 9180}
	for _, tc := range []struct {
		local   net.Addr
		host    string
		foreign bool
	}{
		{loop, "127.0.0.1:9180", false},
		{loop, "localhost:9180", false},
		{loop, "LOCALHOST.", false},
		{loop, "ui.localhost:9180", false},
		{loop, "[::1]:9180", false},
		{loop, "127.8.9.10", false},
		{loop, "evil.example:9180", true},
		{loop, "evil.example", true},
		{loop, "localhost.evil.example", true},
		{loop, "10.0.0.5:9180", true},
		{loop, "", true},
		{lan, "evil.example", false}, // not a loopback listener
	} {
		r := httptest.NewRequest("GET", "/healthz", nil)
		r.Host = tc.host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
		if got := ForeignHost(r); got != tc.foreign {
			t.Errorf("ForeignHost(local %s, Host %q) = %v, want %v", tc.local, tc.host, got, tc.foreign)
		}
	}
}

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottle(3, 5*time.Second, func() time.Time { return now })
	for i := range 3 {
		if ok, _ := th.Take(); !ok {
			t.Fatalf("try %d refused, want the burst of 3", i+1)
		}
	}
	ok, wait := th.Take()
	if ok || wait != 5*time.Second {
		t.Fatalf("fourth try: %v, wait %v; want refused for 5s", ok, wait)
	}
	now = now.Add(2 * time.Second)
	if ok, wait := th.Take(); ok || wait != 3*time.Second {
		t.Fatalf("after 2s: %v, wait %v; want refused for 3s more", ok, wait)
	}
	now = now.Add(3 * time.Second)
	if ok, _ := th.Take(); !ok {
		t.Fatal("after 5s: refused, want one try back")
	}
	th.Give() // a correct one gives its try back
	if ok, _ := th.Take(); !ok {
		t.Fatal("the try given back is not there")
	}
	if ok, _ := th.Take(); ok {
		t.Fatal("a try from nowhere")
	}
}
