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
}

// sessions are the console's sessions, server-side: a session ends at
// logout, after idle without a request, or max after its login.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(idle, max time.Duration) *sessions {
	return &sessions{idle: idle, max: max, now: time.Now, byID: map[string]*session{}}
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// start begins a session.
func (ss *sessions) start() *session {
	now := ss.now()
	s := &session{id: random(), csrf: random(), created: now, seen: now}
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
