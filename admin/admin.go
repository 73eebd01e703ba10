package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/httpguard"
)

// Consumer is what the admin API needs of a consumer. *consumer.Consumer
// satisfies it for every key and value type. Its methods must be safe for
// concurrent use.
type Consumer interface {
	Stats() consumer.Stats
	SetRetryEnabled(on bool)
	RetryEnabled() bool
	Skip(topic string, partition int32, offset int64) error
	DeadLetter(topic string, partition int32, offset int64, who string) error
	Pause(topic string, partition int32) error
	Resume(topic string, partition int32) error
	ResumeFlood() error
}

var _ Consumer = (*consumer.Consumer[string, string])(nil)

// EnvToken is the environment variable read for the bearer token when
// [Config.Token] is empty.
const EnvToken = "ANTIDOTE_ADMIN_TOKEN"

// Config configures a [Handler]. Its zero value is not valid: Consumers is
// required.
type Config struct {
	// Consumers to serve, by name. Required: at least one. A name may hold
	// letters, digits, '.', '_' and '-'. With several consumers, a request
	// that acts on one names it with the query parameter consumer=NAME.
	Consumers map[string]Consumer
	// Token is the bearer token every POST (and, unless OpenReads, every
	// GET of /stats and /metrics) must carry in "Authorization: Bearer
	// <token>". Optional. Default: the environment variable
	// ANTIDOTE_ADMIN_TOKEN; if that is empty too, the token of Console
	// when it has one (a console.Handler: one token for the API and its
	// console's login); else a random token is generated and logged once,
	// at Warn level, by [New] (see [Handler.Token]).
	Token string
	// Metrics, if set, is served at GET /metrics (for example
	// promhttp.HandlerFor of the registry that package metrics/prom
	// registers on). Optional. Default: /metrics answers 404.
	Metrics http.Handler
	// OpenReads lets GET /stats and GET /metrics through without the token,
	// for a scraper that cannot send one. Optional. Default false: they
	// need the token, as POSTs do. /healthz and /readyz are always open.
	OpenReads bool
	// AllowRemote lets [Handler.Listen] listen on an address that is not a
	// loopback address. Optional. Default false: Listen refuses it.
	AllowRemote bool
	// Logger receives a line for every change made through the API and for
	// every refused token, with the remote address. Optional. Default
	// slog.Default().
	Logger *slog.Logger
	// TLS, if set, makes [Handler.Listen] serve over TLS with it (at
	// least a certificate). Optional. Default: plain HTTP, which Listen
	// refuses on an address other than loopback when Console is set: its
	// logins and session cookies would cross the network in the clear.
	TLS *tls.Config
	// Audit, if set, receives every change asked with the token (who,
	// what, when, the result) once it is answered. Optional. Default: the
	// Console's AuditAdmin when it has one (a console.Handler: its audit
	// log then shows the API's changes beside its own).
	Audit func(AuditEvent)
	// Console, if set, is served under /ui/: the web console (package
	// console, created with Prefix "/ui/"), which has its own login page
	// and CSRF protection. Optional. Default: /ui/ answers 404.
	Console http.Handler
}

// Handler is the admin API's http.Handler. Create it with [New]; mount it at
// the root of a server, or under a prefix with http.StripPrefix.
type Handler struct {
	names     []string // sorted
	consumers map[string]Consumer
	tokenSum  [sha256.Size]byte
	token     string
	metrics   http.Handler
	console   http.Handler
	openReads bool
	remote    bool
	tls       *tls.Config
	audit     func(AuditEvent)
	log       *slog.Logger
	mux       *http.ServeMux
	throttle  *httpguard.Throttle // of wrong tokens
}

// New validates cfg and returns the handler. Errors wrap [ErrConfig].
func New(cfg Config) (*Handler, error) {
	if len(cfg.Consumers) == 0 {
		return nil, configErr("Consumers", "at least one consumer is required")
	}
	h := &Handler{
		consumers: make(map[string]Consumer, len(cfg.Consumers)),
		metrics:   cfg.Metrics,
		console:   cfg.Console,
		openReads: cfg.OpenReads,
		remote:    cfg.AllowRemote,
		tls:       cfg.TLS,
		audit:     cfg.Audit,
		log:       cfg.Logger,
		throttle:  httpguard.NewThrottle(httpguard.DefaultBurst, httpguard.DefaultEvery, nil),
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	for name, c := range cfg.Consumers {
		if !validName(name, 200) {
			return nil, configErr("Consumers", fmt.Sprintf("name %q: use letters, digits, '.', '_' and '-'", name))
		}
		if c == nil {
			return nil, configErr("Consumers", fmt.Sprintf("%s: nil consumer", name))
		}
		h.consumers[name] = c
		h.names = append(h.names, name)
	}
	slices.Sort(h.names)
	tok, generated := cfg.Token, false
	if tok == "" {
		tok = strings.TrimSpace(os.Getenv(EnvToken))
	}
	if a, ok := cfg.Console.(interface{ AuditAdmin(AuditEvent) }); ok && h.audit == nil {
		h.audit = a.AuditAdmin
	}
	con, _ := cfg.Console.(interface{ Token() string })
	if tok == "" && con != nil {
		tok = con.Token()
	}
	if tok == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("admin: generating a token: %w", err)
		}
		tok, generated = hex.EncodeToString(b[:]), true
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return nil, configErr("Token", "must not contain white space")
	}
	h.token, h.tokenSum = tok, sha256.Sum256([]byte(tok))
	if generated {
		h.log.Warn("admin: no token configured; generated one for this process (set "+EnvToken+" to choose it)", "token", tok)
	}
	if con != nil && con.Token() != tok {
		h.log.Warn("admin: the console under /ui/ has a token of its own: its login refuses the admin API's token (give both the same Token, or leave the admin API's empty to take the console's)")
	}
	h.routes()
	return h, nil
}

// Token returns the bearer token the handler accepts.
func (h *Handler) Token() string { return h.token }

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", h.healthz)
	m.HandleFunc("GET /readyz", h.readyz)
	m.HandleFunc("GET /stats", h.read(h.stats))
	m.HandleFunc("GET /metrics", h.read(h.serveMetrics))
	m.HandleFunc("POST /retry", h.write(h.audited("retry", h.retry)))
	m.HandleFunc("POST /partitions/{topic}/{partition}/skip", h.write(h.audited("skip", h.skip)))
	m.HandleFunc("POST /partitions/{topic}/{partition}/deadletter", h.write(h.audited("dead-letter", h.deadLetter)))
	m.HandleFunc("POST /partitions/{topic}/{partition}/pause", h.write(h.audited("pause", h.pause)))
	m.HandleFunc("POST /partitions/{topic}/{partition}/resume", h.write(h.audited("resume", h.resume)))
	m.HandleFunc("POST /flood/resume", h.write(h.audited("flood-resume", h.resumeFlood)))
	// The same paths with any other method: 405 with a JSON body (the
	// mux's own answer is plain text).
	for path, allow := range map[string]string{
		"/healthz": "GET, HEAD", "/readyz": "GET, HEAD", "/stats": "GET, HEAD", "/metrics": "GET, HEAD",
		"/retry":                               "POST",
		"/partitions/{topic}/{partition}/skip": "POST",
		"/partitions/{topic}/{partition}/deadletter": "POST",
		"/partitions/{topic}/{partition}/pause":      "POST",
		"/partitions/{topic}/{partition}/resume":     "POST",
		"/flood/resume":                              "POST",
	} {
		m.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, path, allow))
		})
	}
	malformed := func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusBadRequest, "malformed path: want /partitions/{topic}/{partition}/skip, /pause or /resume")
	}
	if h.console != nil {
		m.Handle("/ui/", h.console)
		m.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
	}
	m.HandleFunc("/partitions", malformed)
	m.HandleFunc("/partitions/", malformed)
	m.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	h.mux = m
}

// ServeHTTP serves the admin API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("admin: handler panic", "path", r.URL.Path, "remote", r.RemoteAddr, "panic", fmt.Sprint(v))
			writeError(w, http.StatusInternalServerError, "internal error")
		}
	}()
	if httpguard.ForeignHost(r) {
		// DNS rebinding: a page of another site that reaches this
		// loopback listener by a name of its own.
		h.log.Warn("admin: request refused: foreign Host on a loopback listener", "host", truncate(r.Host, 100), "path", r.URL.Path, "remote", r.RemoteAddr)
		httpguard.Misdirected(w)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

// authorized checks the bearer token in constant time (of the token's
// hash, so that its length does not leak either).
func (h *Handler) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request) {
	msg := "missing bearer token"
	if r.Header.Get("Authorization") != "" {
		msg = "wrong bearer token"
	}
	msg += ": send Authorization: Bearer TOKEN, the token the admin API was started with (Config.Token or " + EnvToken + ") or logged at start"
	h.log.Warn("admin: request refused: "+strings.SplitN(msg, ":", 2)[0], "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("WWW-Authenticate", `Bearer realm="antidote-admin"`)
	writeError(w, http.StatusUnauthorized, msg)
}

// allowed checks the request's token, or answers it. Wrong tokens are
// throttled: after a burst of them, every request with a token is
// answered 429 until tries come back (httpguard.Throttle).
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") == "" {
		h.refuse(w, r)
		return false
	}
	if ok, wait := h.throttle.Take(); !ok {
		h.log.Warn("admin: request refused: too many wrong tokens", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		httpguard.RetryAfter(w, wait)
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many wrong tokens: try again in %s", wait.Round(time.Second)))
		return false
	}
	if !h.authorized(r) {
		h.refuse(w, r)
		return false
	}
	h.throttle.Give()
	return true
}

// read guards a GET of /stats or /metrics.
func (h *Handler) read(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.openReads && !h.allowed(w, r) {
			return
		}
		next(w, r)
	}
}

// write guards a POST.
func (h *Handler) write(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.allowed(w, r) {
			return
		}
		next(w, r)
	}
}

func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readiness is the body of /readyz.
type readiness struct {
	Ready     bool              `json:"ready"`
	Error     string            `json:"error,omitempty"`
	Consumers map[string]string `json:"consumers"` // name: "ready" or why not
}

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	out := readiness{Ready: true, Consumers: make(map[string]string, len(h.names))}
	var why []string
	for _, name := range h.names {
		reason := notReady(h.consumers[name].Stats())
		if reason == "" {
			out.Consumers[name] = "ready"
			continue
		}
		out.Ready = false
		out.Consumers[name] = reason
		why = append(why, name+": "+reason)
	}
	if !out.Ready {
		out.Error = "not ready: " + strings.Join(why, "; ")
		writeJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// notReady says why a consumer is not ready, or "" when it is.
func notReady(s consumer.Stats) string {
	switch {
	case s.Ready:
		return ""
	case s.Flood != nil:
		return "held by the flood guard (POST /flood/resume, or antidote ctl flood resume)"
	case s.Halted > 0:
		return "halted by a failure policy"
	case !s.Running:
		return "not running"
	case len(s.Partitions) == 0:
		return "no partitions assigned"
	default:
		return "not ready"
	}
}

// StatsResponse is the body of GET /stats: the Stats of each consumer, by
// name.
type StatsResponse struct {
	Consumers map[string]consumer.Stats `json:"consumers"`
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	names := h.names
	if q := r.URL.Query(); q.Has("consumer") {
		name := q.Get("consumer")
		if _, ok := h.consumers[name]; !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no consumer named %q", name))
			return
		}
		names = []string{name}
	}
	out := StatsResponse{Consumers: make(map[string]consumer.Stats, len(names))}
	for _, name := range names {
		out.Consumers[name] = h.consumers[name].Stats()
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if h.metrics == nil {
		writeError(w, http.StatusNotFound, "no metrics configured")
		return
	}
	h.metrics.ServeHTTP(w, r)
}

// target returns the consumer a POST acts on: the one named by the query
// parameter consumer, or the only one.
func (h *Handler) target(w http.ResponseWriter, r *http.Request) (string, Consumer, bool) {
	q := r.URL.Query()
	if !q.Has("consumer") {
		if len(h.names) == 1 {
			return h.names[0], h.consumers[h.names[0]], true
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d consumers are served (%s): name one with ?consumer=NAME", len(h.names), strings.Join(h.names, ", ")))
		return "", nil, false
	}
	name := q.Get("consumer")
	c, ok := h.consumers[name]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no consumer named %q", name))
		return "", nil, false
	}
	return name, c, true
}

// RetryResponse is the body of a successful POST /retry.
type RetryResponse struct {
	Consumer     string `json:"consumer"`
	RetryEnabled bool   `json:"retry_enabled"`
}

func (h *Handler) retry(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("enabled")
	on, err := parseSwitch(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name, c, ok := h.target(w, r)
	if !ok {
		return
	}
	was := c.RetryEnabled()
	c.SetRetryEnabled(on)
	h.log.Warn("admin: retry kill switch set", "consumer", name, "retry_enabled", on, "was", was, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, RetryResponse{Consumer: name, RetryEnabled: c.RetryEnabled()})
}

// parseSwitch reads the enabled parameter of POST /retry.
func parseSwitch(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	case "":
		return false, errors.New("missing query parameter enabled: want enabled=on or enabled=off")
	default:
		return false, fmt.Errorf("enabled=%q: want on or off", truncate(s, 32))
	}
}

// PartitionResponse is the body of a successful skip, pause or resume.
type PartitionResponse struct {
	Consumer  string `json:"consumer"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Action is "skipped", "paused" or "resumed".
	Action string `json:"action"`
	// Offset is the skipped record's offset (skip only).
	Offset *int64 `json:"offset,omitempty"`
}

// partitionPath reads {topic} and {partition}.
func partitionPath(w http.ResponseWriter, r *http.Request) (string, int32, bool) {
	topic := r.PathValue("topic")
	if !validName(topic, 249) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("malformed topic %q: a Kafka topic name has 1 to 249 of [a-zA-Z0-9._-]", truncate(topic, 64)))
		return "", 0, false
	}
	raw := r.PathValue("partition")
	p, err := strconv.ParseInt(raw, 10, 32)
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("malformed partition %q: want a number from 0", truncate(raw, 32)))
		return "", 0, false
	}
	return topic, int32(p), true
}

// stuckOffset reads the offset query parameter of an action on the record
// a partition is stuck on.
func stuckOffset(w http.ResponseWriter, r *http.Request, action string) (int64, bool) {
	q := r.URL.Query()
	if !q.Has("offset") {
		writeError(w, http.StatusBadRequest, "missing query parameter offset: "+action+" names the offset the partition is stuck on (see GET /stats)")
		return 0, false
	}
	raw := q.Get("offset")
	offset, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("malformed offset %q: want a number from 0", truncate(raw, 32)))
		return 0, false
	}
	return offset, true
}

// deadLetter sends the record a partition is stuck on to its dead-letter
// topic; the letter names who asked: the query parameter who, else the
// admin API and the caller's address.
func (h *Handler) deadLetter(w http.ResponseWriter, r *http.Request) {
	topic, part, ok := partitionPath(w, r)
	if !ok {
		return
	}
	offset, ok := stuckOffset(w, r, "deadletter")
	if !ok {
		return
	}
	name, c, ok := h.target(w, r)
	if !ok {
		return
	}
	who := r.URL.Query().Get("who")
	if who == "" {
		who = "admin API, " + r.RemoteAddr
	}
	if err := c.DeadLetter(topic, part, offset, who); err != nil {
		h.log.Warn("admin: dead letter refused", "consumer", name, "topic", topic, "partition", part, "offset", offset, "remote", r.RemoteAddr, "err", err)
		writeControlError(w, err)
		return
	}
	h.log.Warn("admin: record sent to the dead-letter topic", "consumer", name, "topic", topic, "partition", part, "offset", offset, "who", who, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, PartitionResponse{Consumer: name, Topic: topic, Partition: part, Action: "dead-lettered", Offset: &offset})
}

func (h *Handler) skip(w http.ResponseWriter, r *http.Request) {
	topic, part, ok := partitionPath(w, r)
	if !ok {
		return
	}
	offset, ok := stuckOffset(w, r, "skip")
	if !ok {
		return
	}
	name, c, ok := h.target(w, r)
	if !ok {
		return
	}
	if err := c.Skip(topic, part, offset); err != nil {
		h.log.Warn("admin: skip refused", "consumer", name, "topic", topic, "partition", part, "offset", offset, "remote", r.RemoteAddr, "err", err)
		writeControlError(w, err)
		return
	}
	h.log.Warn("admin: record skipped", "consumer", name, "topic", topic, "partition", part, "offset", offset, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, PartitionResponse{Consumer: name, Topic: topic, Partition: part, Action: "skipped", Offset: &offset})
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	h.pauseResume(w, r, "paused", Consumer.Pause)
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	h.pauseResume(w, r, "resumed", Consumer.Resume)
}

func (h *Handler) pauseResume(w http.ResponseWriter, r *http.Request, action string, do func(Consumer, string, int32) error) {
	topic, part, ok := partitionPath(w, r)
	if !ok {
		return
	}
	name, c, ok := h.target(w, r)
	if !ok {
		return
	}
	if err := do(c, topic, part); err != nil {
		writeControlError(w, err)
		return
	}
	h.log.Warn("admin: partition "+action, "consumer", name, "topic", topic, "partition", part, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, PartitionResponse{Consumer: name, Topic: topic, Partition: part, Action: action})
}

// FloodResponse is the body of a successful POST /flood/resume.
type FloodResponse struct {
	Consumer string `json:"consumer"`
	// Resumed is the flood guard's state that was cleared.
	Resumed consumer.Flood `json:"resumed"`
}

// resumeFlood resumes a consumer stopped by its flood guard (409 when the
// guard has not tripped).
func (h *Handler) resumeFlood(w http.ResponseWriter, r *http.Request) {
	name, c, ok := h.target(w, r)
	if !ok {
		return
	}
	f := c.Stats().Flood
	if err := c.ResumeFlood(); err != nil {
		writeControlError(w, err)
		return
	}
	h.log.Warn("admin: flood guard resumed", "consumer", name, "remote", r.RemoteAddr)
	resp := FloodResponse{Consumer: name}
	if f != nil {
		resp.Resumed = *f
	}
	writeJSON(w, http.StatusOK, resp)
}

// writeControlError maps the consumer's control errors to statuses.
func writeControlError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, consumer.ErrNotAssigned):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, consumer.ErrNotStuck), errors.Is(err, consumer.ErrNotFlooded), errors.Is(err, consumer.ErrNotRetrying):
		writeError(w, http.StatusConflict, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// ErrorResponse is the body of every error: {"error": "..."}.
type ErrorResponse struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// validName reports whether s is 1 to max of [a-zA-Z0-9._-], as Kafka topic
// names are.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
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

// truncate shortens what a client sent before it is echoed back, quoted.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
