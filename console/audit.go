package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/deadletter"
)

// DefaultAuditSize is how many entries the audit log keeps by default.
const DefaultAuditSize = 1000

// AuditEntry is one operator action in the audit log: who asked, what,
// when, and what came of it. A viewer's refused try is kept too.
type AuditEntry struct {
	Time   time.Time `json:"time"`
	Who    string    `json:"who"`
	Role   Role      `json:"role"`
	Remote string    `json:"remote"`
	// Action is the route's name: redrive, redrive-stop, purge, retry,
	// skip, dead-letter, pause, resume, flood-resume.
	Action string `json:"action"`
	// Target is what it acted on: the consumer, topic, partition and
	// offset, the redrive's topic and scope; for a purge, the redrive and
	// the offsets its plan deletes below (the Result says what was
	// deleted).
	Target string `json:"target"`
	// Status is the HTTP status of the answer; Result is "ok", or why
	// the action failed or was refused.
	Status int    `json:"status"`
	Result string `json:"result"`
}

// auditLog keeps the last entries, newest last.
type auditLog struct {
	mu      sync.Mutex
	entries []AuditEntry
	next    int // where the next entry goes once full
	size    int
}

func (a *auditLog) add(e AuditEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.entries) < a.size {
		a.entries = append(a.entries, e)
		return
	}
	a.entries[a.next] = e
	a.next = (a.next + 1) % a.size
}

// newestFirst returns a copy of the entries, newest first.
func (a *auditLog) newestFirst() []AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]AuditEntry, 0, len(a.entries))
	for i := range a.entries {
		out = append(out, a.entries[(a.next+len(a.entries)-1-i)%len(a.entries)])
	}
	return out
}

// Audit returns the audit log, newest first: the last [Config.AuditSize]
// operator actions.
func (h *Handler) Audit() []AuditEntry { return h.audit.newestFirst() }

// auditNote carries, from the action's handler to the audit log, why the
// action failed.
type auditNote struct{ msg string }

type auditNoteKey struct{}

// noteResult tells the audit log what came of the action of r: why it
// failed, or what it did when "ok" says too little.
func noteResult(r *http.Request, msg string) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok && n.msg == "" {
		n.msg = msg
	}
}

// statusWriter keeps the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// operator guards an operator's action: what action guards, and the
// operator role; a viewer is refused with 403. Every try is kept in the
// audit log and logged.
func (h *Handler) operator(name string, next http.HandlerFunc) http.HandlerFunc {
	return h.action(func(w http.ResponseWriter, r *http.Request) {
		c, _ := h.callerOf(r)
		e := AuditEntry{Time: time.Now().UTC(), Who: c.who(), Role: c.role(), Remote: r.RemoteAddr, Action: name, Target: auditTarget(r)}
		if c.role() != RoleOperator {
			e.Status, e.Result = http.StatusForbidden, "refused: the "+string(c.role())+" role may not act"
			h.keep(e)
			h.fail(w, r, http.StatusForbidden, "refused: "+c.who()+" is a "+string(c.role())+", and "+name+" is an operator's action. "+
				"Ask whoever runs the console to give you the operator role (a group its login maps to operators).")
			return
		}
		note := &auditNote{}
		sw := &statusWriter{ResponseWriter: w}
		next(sw, r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note)))
		e.Status = sw.status
		switch {
		case sw.status >= 400:
			e.Result = "failed: " + note.msg
		case note.msg != "":
			e.Result = note.msg
		default:
			e.Result = "ok"
		}
		h.keep(e)
	})
}

// AuditAdmin keeps a change made through the admin API that serves this
// console ([admin.Config.Audit]) in the console's audit log.
func (h *Handler) AuditAdmin(e admin.AuditEvent) {
	h.keep(AuditEntry{Time: e.Time, Who: visible(e.Who), Role: RoleOperator, Remote: e.Remote,
		Action: e.Action, Target: visible(e.Target), Status: e.Status, Result: visible(e.Result)})
}

func (h *Handler) keep(e AuditEntry) {
	h.audit.add(e)
	h.log.Warn("console: audit", "who", e.Who, "role", string(e.Role), "action", e.Action, "target", e.Target, "status", e.Status, "result", e.Result, "remote", e.Remote)
}

// auditTarget names what the action of r acts on, from its path and form.
func auditTarget(r *http.Request) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+deadletter.Truncate(visible(v), 200))
		}
	}
	add("consumer", r.PathValue("name"))
	add("redrive", r.PathValue("id"))
	add("dead-letter topic", r.PathValue("topic"))
	for _, k := range []string{"topic", "partition", "offset", "enabled", "action", "scope"} {
		add(k, r.PostForm.Get(k))
	}
	add("below", strings.Join(r.PostForm["below"], " "))
	return strings.Join(parts, ", ")
}

func (h *Handler) auditPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "audit", h.Audit())
}

func (h *Handler) auditJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{"entries": h.Audit()})
}
