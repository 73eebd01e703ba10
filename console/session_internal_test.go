package console

import (
	"testing"
	"time"
)

// TestSessionExpiry: a session ends after SessionIdle without use, and
// SessionMax after its start however much it is used.
func TestSessionExpiry(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ss := newSessions(30*time.Minute, 2*time.Hour)
	ss.now = func() time.Time { return now }

	idle := ss.start("token", RoleOperator)
	now = now.Add(29 * time.Minute)
	if ss.get(idle.id) == nil {
		t.Fatal("a session used 29 minutes ago ended (idle 30m)")
	}
	now = now.Add(30 * time.Minute)
	if ss.get(idle.id) != nil {
		t.Fatal("a session unused for 30 minutes lives on")
	}

	busy := ss.start("token", RoleOperator)
	for range 7 { // used every 20 minutes, for 2h20m
		now = now.Add(20 * time.Minute)
		if s := ss.get(busy.id); s == nil && now.Sub(busy.created) < 2*time.Hour {
			t.Fatalf("a session in use ended after %v", now.Sub(busy.created))
		} else if s != nil && now.Sub(busy.created) >= 2*time.Hour {
			t.Fatalf("a session lives %v after its login (max 2h)", now.Sub(busy.created))
		}
	}
	if len(ss.byID) != 0 {
		t.Errorf("%d sessions kept after they ended", len(ss.byID))
	}
	if ss.get("short") != nil || ss.get("") != nil {
		t.Error("a malformed id found a session")
	}
}

// TestPendingLogins: a login at the provider comes back once, within
// pendingTTL; an unknown state finds nothing.
func TestPendingLogins(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ss := newSessions(30*time.Minute, 2*time.Hour)
	ss.now = func() time.Time { return now }
	state, p := ss.begin("/ui/consumers/orders")
	if got := ss.finish(state); got != p || got.next != "/ui/consumers/orders" || len(got.verifier) < 43 || got.nonce == "" {
		t.Fatalf("finish: %+v", got)
	}
	if ss.finish(state) != nil {
		t.Fatal("a state came back twice")
	}
	if ss.finish("unknown") != nil {
		t.Fatal("an unknown state found a login")
	}
	late, _ := ss.begin("/ui/")
	now = now.Add(pendingTTL)
	if ss.finish(late) != nil {
		t.Fatal("a login came back after pendingTTL")
	}
	for range maxPending + 10 {
		ss.begin("/ui/")
	}
	if len(ss.pending) > maxPending {
		t.Errorf("%d pending logins kept, bound %d", len(ss.pending), maxPending)
	}
}
