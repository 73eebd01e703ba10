package console

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/antidote-kafka/antidote/deadletter"
)

// redirectURL is where the provider sends the browser back.
func (h *Handler) redirectURL(r *http.Request) string {
	if h.cfg.URL != "" {
		return h.cfg.URL + "login/callback"
	}
	scheme := "http"
	if secure(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + h.prefix + "login/callback"
}

// loginStart sends the browser to the provider of Config.Login, with a
// new state, nonce and PKCE verifier kept here; a cookie binds the state
// to this browser. It is a GET, a link: the Content-Security-Policy's
// form-action 'self' would stop a form's redirect to the provider. It
// changes nothing but a pending login of its own.
func (h *Handler) loginStart(w http.ResponseWriter, r *http.Request) {
	next := h.safeNext(r.URL.Query().Get("next"))
	state, p := h.sessions.begin(next)
	u, err := h.cfg.Login.AuthURL(r.Context(), h.redirectURL(r), state, p.nonce, p.verifier)
	if err != nil {
		h.sessions.finish(state)
		h.log.Error("console: login at the provider", "err", err, "remote", r.RemoteAddr)
		h.render(w, r, http.StatusBadGateway, "login", h.loginData(next, "the identity provider cannot be reached: "+err.Error()))
		return
	}
	// Lax: the provider sends the browser back with a top-level GET from
	// its own site.
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: state, Path: h.prefix + "login/", MaxAge: int(pendingTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// loginCallback is where the provider sends the browser back: the state
// must be the one this browser started, once; the code is exchanged and
// the ID token verified by Config.Login; a session starts for who it
// names, with their role.
func (h *Handler) loginCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: h.prefix + "login/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
	state := q.Get("state")
	ck, err := r.Cookie(loginCookie)
	if state == "" || err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		h.log.Warn("console: login refused: a state this browser did not start", "remote", r.RemoteAddr)
		h.render(w, r, http.StatusBadRequest, "login", h.loginData(h.prefix, "this login was not started in this browser, or it took too long: log in again"))
		return
	}
	p := h.sessions.finish(state)
	if p == nil {
		h.render(w, r, http.StatusBadRequest, "login", h.loginData(h.prefix, "this login expired or was already used: log in again"))
		return
	}
	if e := q.Get("error"); e != "" {
		msg := "the identity provider refused the login: " + deadletter.Truncate(visible(strings.TrimSpace(e+" "+q.Get("error_description"))), 300)
		h.log.Warn("console: login refused by the provider", "error", deadletter.Truncate(e, 100), "remote", r.RemoteAddr)
		h.render(w, r, http.StatusUnauthorized, "login", h.loginData(p.next, msg))
		return
	}
	id, err := h.cfg.Login.Exchange(r.Context(), h.redirectURL(r), q.Get("code"), p.verifier, p.nonce)
	if err != nil {
		status, msg := http.StatusBadGateway, "the identity provider's answer could not be verified: "+err.Error()
		if errors.Is(err, ErrNoRole) {
			status, msg = http.StatusForbidden, "refused: "+err.Error()+". Ask whoever runs the console to add you to a group it maps to viewers or operators."
		}
		h.log.Warn("console: login refused", "err", err, "remote", r.RemoteAddr)
		h.render(w, r, status, "login", h.loginData(p.next, msg))
		return
	}
	if id.Role != RoleViewer && id.Role != RoleOperator {
		h.render(w, r, http.StatusForbidden, "login", h.loginData(p.next, "refused: the login gave no role"))
		return
	}
	who := id.Name
	if who == "" {
		who = id.Subject
	}
	who = deadletter.Truncate(visible(who), 200)
	h.startSession(w, r, who, id.Role)
	h.log.Info("console: logged in", "who", who, "role", string(id.Role), "remote", r.RemoteAddr)
	// A page rather than a redirect: the browser came from the provider's
	// site, and would not send the SameSite=Strict cookie on a redirect
	// of that navigation; app.js goes on from this page of the console.
	h.render(w, r, http.StatusOK, "signedin", map[string]any{"Next": p.next, "Who": who, "Role": id.Role})
}
