package console

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/httpguard"
)

// DecodeFunc decodes the key (key true) or the value of a record of the
// original topic into text for the letter page, for example Avro through a
// schema registry as JSON. It must be safe for concurrent use and must not
// keep b. Its text is shown escaped, as every record content is.
type DecodeFunc func(ctx context.Context, topic string, key bool, b []byte) (string, error)

// Defaults of the optional [Config] fields.
const (
	DefaultPageSize    = 50
	DefaultMaxReaders  = 4
	DefaultIdleTimeout = 10 * time.Second
	// DefaultShowBytes is how much of a key or value the letter page
	// shows before "show all".
	DefaultShowBytes = 64 << 10
)

// Config configures the console. ClientOpts is required; the zero value
// of every other field is a valid default.
type Config struct {
	// ClientOpts are the options of the Kafka clients the console reads
	// and redrives with: the seed brokers (kgo.SeedBrokers) and what the
	// cluster needs (TLS, SASL). Required. The console makes its own
	// clients from them (a scan needs a client of its own, and a redrive
	// too), at most MaxReaders for pages at a time.
	ClientOpts []kgo.Opt
	// Topics are the dead-letter topics the first page lists. Optional;
	// default: the cluster's topics whose names look like dead-letter
	// topics (dlq, dlt or dead-letter in the name), and the dead-letter
	// topics of the Consumers. Any topic can be opened by name.
	Topics []string
	// Consumers are running consumers whose partitions the console shows
	// and steers (kill switch, skip, pause, flood guard). Optional.
	Consumers map[string]admin.Consumer
	// Token is what the login page asks for. Optional. Default: the
	// environment variable ANTIDOTE_ADMIN_TOKEN (the admin API's); if that
	// is empty too, a random token that [New] logs once at Warn level
	// ([Handler.Token] returns it).
	Token string
	// Decode, when set, adds a "decoded" view of keys and values to the
	// letter page. Optional.
	Decode DecodeFunc
	// HideValues shows keys, values and original header values as their
	// size and SHA-256 only, for topics with personal data. Optional.
	HideValues bool
	// Prefix is the path the console is served under, with a trailing
	// slash ("/ui/" under the admin API). Optional; default "/".
	Prefix string
	// PageSize is how many letters a page of the table shows. Optional;
	// default [DefaultPageSize].
	PageSize int
	// MaxReaders bounds the clients reading for pages at a time.
	// Optional; default [DefaultMaxReaders].
	MaxReaders int
	// IdleTimeout is [deadletter.ScanConfig.IdleTimeout] of every scan.
	// Optional; default [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// ShowBytes is how much of a key or value the letter page shows
	// before "show all". Optional; default [DefaultShowBytes].
	ShowBytes int
	// SessionIdle ends a browser's session after this long without a
	// request, and SessionMax this long after its login, whatever its
	// use. Optional; defaults [DefaultSessionIdle], [DefaultSessionMax].
	SessionIdle time.Duration
	SessionMax  time.Duration
	// Login, when set, adds a way to log in beside the token, such as
	// OpenID Connect (package console/oidc): its users are viewers or
	// operators, as it says. Optional.
	Login Login
	// URL is the console's address as browsers reach it, with the
	// prefix and a trailing slash (https://antidote.example/ui/): the
	// provider of Login sends them back to URL + "login/callback", which
	// it must know. Optional; default: the scheme and Host of the request
	// followed by Prefix.
	URL string
	// AuditSize is how many operator actions the audit log keeps (its
	// page and [Handler.Audit]); each is also logged. Optional; default
	// [DefaultAuditSize].
	AuditSize int
	// LiveEvery is how often the console samples each consumer's Stats
	// for the consumer page's last minutes (rates, lag, stuck time; it
	// keeps 120 samples), and how often that page refreshes itself when
	// asked. Optional; default [DefaultLiveEvery].
	LiveEvery time.Duration
	// Logger receives a line for every action (redrive, purge, kill
	// switch, skip, pause) and every refused login, with the remote
	// address.
	// Optional; default slog.Default().
	Logger *slog.Logger
}

//go:embed assets
var assets embed.FS

// Handler is the console's http.Handler. Create it with [New]; Close it
// when done.
type Handler struct {
	cfg      Config
	prefix   string
	token    string
	tokSum   [sha256.Size]byte
	sessions *sessions
	log      *slog.Logger
	mux      *http.ServeMux
	pages    map[string]*template.Template
	static   http.Handler
	names    []string // consumer names, sorted

	readers chan *kgo.Client // idle readers
	slots   chan struct{}    // one per reader that may exist
	mu      sync.Mutex
	all     []*kgo.Client
	closed  bool
	actions map[string]string // consumer -> what its last action did

	jobs      *jobs
	throttle  *httpguard.Throttle // of wrong tokens
	audit     *auditLog
	live      *live
	closeOnce sync.Once
}

// cookieName is the session cookie; loginCookie binds a login at the
// provider to the browser that started it.
const (
	cookieName  = "antidote_console"
	loginCookie = "antidote_login"
)

// New validates cfg and returns the console.
func New(cfg Config) (*Handler, error) {
	if len(cfg.ClientOpts) == 0 {
		return nil, errors.New("console: Config.ClientOpts is required (at least kgo.SeedBrokers)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/"
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") || strings.ContainsAny(cfg.Prefix, "{}?#") {
		return nil, fmt.Errorf("console: Config.Prefix %q: want a path with a leading and a trailing slash, such as /ui/", cfg.Prefix)
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.MaxReaders <= 0 {
		cfg.MaxReaders = DefaultMaxReaders
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ShowBytes <= 0 {
		cfg.ShowBytes = DefaultShowBytes
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = DefaultSessionMax
	}
	if cfg.AuditSize <= 0 {
		cfg.AuditSize = DefaultAuditSize
	}
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.HasSuffix(u.Path, cfg.Prefix) || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("console: Config.URL %q: want the console's URL as browsers reach it, such as https://antidote.example%s", cfg.URL, cfg.Prefix)
		}
	}
	for _, t := range cfg.Topics {
		if !validTopic(t) {
			return nil, fmt.Errorf("console: Config.Topics: %q is not a legal topic name", t)
		}
	}
	h := &Handler{cfg: cfg, prefix: cfg.Prefix, log: cfg.Logger, jobs: newJobs(), audit: &auditLog{size: cfg.AuditSize},
		throttle: httpguard.NewThrottle(httpguard.DefaultBurst, httpguard.DefaultEvery, nil)}
	if h.log == nil {
		h.log = slog.Default()
	}
	for name, c := range cfg.Consumers {
		if c == nil || !validTopic(name) {
			return nil, fmt.Errorf("console: Config.Consumers: %q: a name of letters, digits, '.', '_' and '-' and a consumer", name)
		}
		h.names = append(h.names, name)
	}
	slices.Sort(h.names)

	tok, generated := cfg.Token, false
	if tok == "" {
		tok = strings.TrimSpace(os.Getenv(admin.EnvToken))
	}
	if tok == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		tok, generated = hex.EncodeToString(b[:]), true
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return nil, errors.New("console: Config.Token must not contain white space")
	}
	h.token, h.tokSum = tok, sha256.Sum256([]byte(tok))
	// Sessions live in this process: a restart logs every browser out.
	h.sessions = newSessions(cfg.SessionIdle, cfg.SessionMax)
	if generated {
		h.log.Warn("console: no token configured; generated one for this process (set "+admin.EnvToken+" to choose it)", "token", tok)
	}

	var err error
	if h.pages, err = parsePages(h); err != nil {
		return nil, err
	}
	sub, _ := fs.Sub(assets, "assets/static")
	h.static = http.StripPrefix(h.prefix+"static/", http.FileServerFS(sub))
	h.readers = make(chan *kgo.Client, cfg.MaxReaders)
	h.slots = make(chan struct{}, cfg.MaxReaders)
	h.routes()
	h.live = startLive(cfg.Consumers, cmp.Or(cfg.LiveEvery, DefaultLiveEvery))
	return h, nil
}

// Token returns the token the login page accepts.
func (h *Handler) Token() string { return h.token }

// Close stops the redrives in flight (each commits its progress first)
// and closes the console's clients.
func (h *Handler) Close() {
	h.closeOnce.Do(h.live.close)
	h.jobs.stopAll()
	h.mu.Lock()
	h.closed = true
	all := h.all
	h.all = nil
	h.mu.Unlock()
	for _, cl := range all {
		cl.Close()
	}
}

// readOpts bound what a reading client buffers, as the dlq commands do.
func readOpts() []kgo.Opt {
	return append(deadletter.ScanOpts(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(1<<20),
		kgo.FetchMaxPartitionBytes(512<<10),
	)
}

// reader returns a client for one scan, waiting while MaxReaders are busy.
func (h *Handler) reader(ctx context.Context) (*kgo.Client, func(), error) {
	for {
		select {
		case cl := <-h.readers:
			return cl, func() { h.readers <- cl }, nil
		case h.slots <- struct{}{}:
			cl, err := kgo.NewClient(append(slices.Clone(h.cfg.ClientOpts), readOpts()...)...)
			if err != nil {
				<-h.slots
				return nil, nil, err
			}
			h.mu.Lock()
			if h.closed {
				h.mu.Unlock()
				cl.Close()
				return nil, nil, errors.New("console: closed")
			}
			h.all = append(h.all, cl)
			h.mu.Unlock()
			return cl, func() { h.readers <- cl }, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	p := h.prefix
	m.HandleFunc("GET "+p+"{$}", h.auth(h.topicsPage))
	m.HandleFunc("GET "+p+"login", h.loginPage)
	m.HandleFunc("POST "+p+"login", h.login)
	if h.cfg.Login != nil {
		m.HandleFunc("GET "+p+"login/start", h.loginStart)
		m.HandleFunc("GET "+p+"login/callback", h.loginCallback)
	}
	m.HandleFunc("POST "+p+"logout", h.action(h.logout))
	m.HandleFunc("GET "+p+"audit", h.auth(h.auditPage))
	m.HandleFunc("GET "+p+"audit.json", h.auth(h.auditJSON))
	m.Handle("GET "+p+"static/", h.static)
	m.HandleFunc("GET "+p+"topics", h.auth(h.openTopic))
	m.HandleFunc("GET "+p+"topics/{topic}", h.auth(h.topicPage))
	m.HandleFunc("GET "+p+"topics/{topic}/letters/{partition}/{offset}", h.auth(h.letterPage))
	m.HandleFunc("POST "+p+"topics/{topic}/redrive", h.operator("redrive", h.redrive))
	m.HandleFunc("GET "+p+"jobs/{id}", h.auth(h.jobPage))
	m.HandleFunc("POST "+p+"jobs/{id}/stop", h.operator("redrive-stop", h.stopJob))
	m.HandleFunc("GET "+p+"jobs/{id}/purge", h.auth(h.purgePage))
	m.HandleFunc("POST "+p+"jobs/{id}/purge", h.operator("purge", h.purge))
	m.HandleFunc("GET "+p+"consumers/{name}", h.auth(h.consumerPage))
	m.HandleFunc("POST "+p+"consumers/{name}/retry", h.operator("retry", h.setRetry))
	m.HandleFunc("POST "+p+"consumers/{name}/skip", h.operator("skip", h.skip))
	m.HandleFunc("POST "+p+"consumers/{name}/deadletter", h.operator("dead-letter", h.deadLetter))
	m.HandleFunc("POST "+p+"consumers/{name}/pause", h.operator("pause", h.pause))
	m.HandleFunc("POST "+p+"consumers/{name}/resume", h.operator("resume", h.resume))
	m.HandleFunc("POST "+p+"consumers/{name}/flood/resume", h.operator("flood-resume", h.resumeFlood))
	m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "no such page")
	})
	h.mux = m
}

// ServeHTTP serves the console.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("console: handler panic", "path", r.URL.Path, "remote", r.RemoteAddr, "panic", fmt.Sprint(v))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	if httpguard.ForeignHost(r) {
		// DNS rebinding: a page of another site that reaches this
		// loopback listener by a name of its own.
		h.log.Warn("console: request refused: foreign Host on a loopback listener", "host", deadletter.Truncate(r.Host, 100), "path", r.URL.Path, "remote", r.RemoteAddr)
		httpguard.Misdirected(w)
		return
	}
	if httpguard.RemotePlain(r) {
		// A session cookie, a token or a login would cross the network
		// in the clear.
		h.log.Warn("console: request refused: plain HTTP on an address other than loopback", "path", r.URL.Path, "remote", r.RemoteAddr)
		httpguard.PlainRefused(w)
		return
	}
	hd := w.Header()
	// Record contents are hostile: no inline script or style runs, and
	// nothing loads from elsewhere.
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) tokenOK(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return hmac.Equal(sum[:], h.tokSum[:])
}

// auth guards a page: without a session, the login page.
func (h *Handler) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.callerOf(r)
		if !ok {
			http.Redirect(w, r, h.prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, withCaller(r, c))
	}
}

// action guards a POST: a session, the CSRF token of the form, and an
// Origin (when the browser sends one) of this host.
func (h *Handler) action(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		c, ok := h.callerOf(r)
		if !ok {
			h.fail(w, r, http.StatusUnauthorized, "log in first: the session ended (logout, or unused for a while) or never began")
			return
		}
		r = withCaller(r, c)
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				h.log.Warn("console: action refused: cross-origin", "path", r.URL.Path, "origin", deadletter.Truncate(o, 100), "remote", r.RemoteAddr)
				h.fail(w, r, http.StatusForbidden, "cross-origin request refused")
				return
			}
		}
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, http.StatusBadRequest, "malformed form")
			return
		}
		if !c.csrfOK(r.PostForm.Get("csrf")) {
			h.log.Warn("console: action refused: missing or wrong CSRF token", "path", r.URL.Path, "remote", r.RemoteAddr)
			h.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
			return
		}
		next(w, r)
	}
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", h.loginData(h.safeNext(r.URL.Query().Get("next")), ""))
}

// loginData is what the login page shows: the token's form, the button of
// Login, and an error.
func (h *Handler) loginData(next, errMsg string) map[string]any {
	d := map[string]any{"Next": next, "Error": errMsg}
	if h.cfg.Login != nil {
		d["Login"] = h.cfg.Login.Label()
	}
	return d
}

// safeNext keeps a redirect inside the console: a path under the prefix,
// of printable ASCII without a backslash (browsers drop a TAB or a
// newline, so "/<TAB>/evil.example" would become "//evil.example", another
// site), with neither a host nor a scheme, and no "." or ".." segment or
// empty one ("//") that would leave the prefix once resolved.
func (h *Handler) safeNext(next string) string {
	for i := 0; i < len(next); i++ {
		if c := next[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return h.prefix
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, h.prefix) {
		return h.prefix
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if clean != u.Path {
		return h.prefix
	}
	return next
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "malformed form")
		return
	}
	next := h.safeNext(r.PostForm.Get("next"))
	if ok, wait := h.throttle.Take(); !ok {
		h.log.Warn("console: login refused: too many wrong tokens", "remote", r.RemoteAddr)
		httpguard.RetryAfter(w, wait)
		h.render(w, r, http.StatusTooManyRequests, "login", h.loginData(next, fmt.Sprintf("too many wrong tokens: try again in %s", wait.Round(time.Second))))
		return
	}
	if !h.tokenOK(strings.TrimSpace(r.PostForm.Get("token"))) {
		h.log.Warn("console: login refused: wrong token", "remote", r.RemoteAddr)
		h.render(w, r, http.StatusUnauthorized, "login", h.loginData(next, "wrong token"))
		return
	}
	h.throttle.Give()
	h.startSession(w, r, "token", RoleOperator)
	h.log.Info("console: logged in", "who", "token", "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// startSession starts a session and sets its cookie.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, who string, role Role) {
	sess := h.sessions.start(who, role)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: sess.id, Path: h.prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r),
	})
}

// logout ends the session on the server: its cookie, wherever a copy of
// it is, no longer logs in.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if c, ok := h.callerOf(r); ok && c.s != nil {
		h.sessions.end(c.s.id)
		h.log.Info("console: logged out", "remote", r.RemoteAddr)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: h.prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	http.Redirect(w, r, h.prefix+"login", http.StatusSeeOther)
}

// secure reports whether the browser reached the console over TLS: its
// own, or that of a proxy in front, which says so in X-Forwarded-Proto.
func secure(r *http.Request) bool { return httpguard.Secure(r) }

// page is what every template gets.
type page struct {
	Title    string
	Prefix   string
	CSRF     string
	Hidden   bool // HideValues
	Who      string
	Role     Role
	Operator bool // may act: the buttons of actions are enabled
	Data     any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	t, ok := h.pages[name]
	if !ok {
		panic("console: no page " + name)
	}
	p := page{Prefix: h.prefix, Hidden: h.cfg.HideValues, Data: data}
	if c, ok := h.callerOf(r); ok {
		p.CSRF = c.csrf()
		p.Who, p.Role, p.Operator = c.who(), c.role(), c.role() == RoleOperator
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		h.log.Error("console: rendering", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail renders an error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	noteResult(r, msg)
	h.render(w, r, status, "error", map[string]any{"Status": status, "Text": http.StatusText(status), "Message": msg})
}

// validTopic reports whether s is a legal Kafka topic name (and so safe
// in a path).
func validTopic(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
