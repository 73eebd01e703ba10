package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of [Config.SessionIdle] and [Config.SessionMax].
const (
	DefaultSessionIdle = 30 * time.Minute
	DefaultSessionMax  = 12 * time.Hour
)

// maxSessions bounds the sessions kept: logging in past it ends the
// session least recently used.
const maxSessions = 1000

// session is a logged-in browser: its cookie holds the id, a random value
// the server keeps; its forms carry csrf, another random value of the
// same session.
type session struct {
	id, csrf      string
	created, seen time.Time
	who           string // the token, or the provider's user
	role          Role
}

// sessions are the console's sessions, server-side: a session ends at
// logout, after idle without a request, or max after its login.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time

	mu      sync.Mutex
	byID    map[string]*session
	pending map[string]*pending // logins at the provider, by state
}

// pending is a login sent to the provider: its state (the key), and what
// the callback checks and needs.
type pending struct {
	nonce, verifier, next string
	created               time.Time
}

// pendingTTL bounds how long a login may stay at the provider, and
// maxPending how many may be there at once (more ends the oldest).
const (
	pendingTTL = 10 * time.Minute
	maxPending = 1000
)

func newSessions(idle, max time.Duration) *sessions {
	return &sessions{idle: idle, max: max, now: time.Now, byID: map[string]*session{}, pending: map[string]*pending{}}
}

// begin keeps a login sent to the provider and returns its state.
func (ss *sessions) begin(next string) (state string, p *pending) {
	now := ss.now()
	state = random()
	p = &pending{nonce: random(), verifier: random(), next: next, created: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var oldest string
	for st, old := range ss.pending {
		if now.Sub(old.created) >= pendingTTL {
			delete(ss.pending, st)
		} else if oldest == "" || old.created.Before(ss.pending[oldest].created) {
			oldest = st
		}
	}
	if len(ss.pending) >= maxPending {
		delete(ss.pending, oldest)
	}
	ss.pending[state] = p
	return state, p
}

// finish returns the pending login of state once, or nil.
func (ss *sessions) finish(state string) *pending {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	p := ss.pending[state]
	delete(ss.pending, state)
	if p == nil || ss.now().Sub(p.created) >= pendingTTL {
		return nil
	}
	return p
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// start begins a session of who, with role.
func (ss *sessions) start(who string, role Role) *session {
	now := ss.now()
	s := &session{id: random(), csrf: random(), created: now, seen: now, who: who, role: role}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, old := range ss.byID {
		if ss.expired(old, now) {
			delete(ss.byID, id)
		}
	}
	if len(ss.byID) >= maxSessions {
		var lru *session
		for _, old := range ss.byID {
			if lru == nil || old.seen.Before(lru.seen) {
				lru = old
			}
		}
		delete(ss.byID, lru.id)
	}
	ss.byID[s.id] = s
	return s
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.seen) >= ss.idle || now.Sub(s.created) >= ss.max
}

// get returns the live session of id and marks it used, or nil.
func (ss *sessions) get(id string) *session {
	if len(id) != 64 {
		return nil
	}
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	if ss.expired(s, now) {
		delete(ss.byID, id)
		return nil
	}
	s.seen = now
	return s
}

// end ends the session of id.
func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, id)
}

// caller is who sent a request: a browser's session, or a script with
// the bearer token (which needs no CSRF token: a browser never sends an
// Authorization header by itself).
type caller struct {
	s      *session
	bearer bool
}

// who is the caller's name for the audit log.
func (c caller) who() string {
	if c.s != nil {
		return c.s.who
	}
	return "token (bearer)"
}

// role is what the caller may do: the token's callers are operators.
func (c caller) role() Role {
	if c.s != nil {
		return c.s.role
	}
	return RoleOperator
}

type callerKey struct{}

// callerOf returns who sent r, and false for no one logged in. The result
// is kept in r's context by auth and action.
func (h *Handler) callerOf(r *http.Request) (caller, bool) {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c, true
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		if s := h.sessions.get(ck.Value); s != nil {
			return caller{s: s}, true
		}
	}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if ok, _ := h.throttle.Take(); !ok {
			return caller{}, false
		}
		if !h.tokenOK(strings.TrimSpace(tok)) {
			return caller{}, false
		}
		h.throttle.Give()
		return caller{bearer: true}, true
	}
	return caller{}, false
}

func withCaller(r *http.Request, c caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// csrfOK reports whether the form's CSRF token is the session's.
func (c caller) csrfOK(token string) bool {
	if c.bearer {
		return true
	}
	return c.s != nil && subtle.ConstantTimeCompare([]byte(token), []byte(c.s.csrf)) == 1
}

// csrf is the CSRF token the pages of c carry.
func (c caller) csrf() string {
	if c.s != nil {
		return c.s.csrf
	}
	if c.bearer {
		return "bearer"
	}
	return ""
}
