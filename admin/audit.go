package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// AuditEvent is a change asked of the API by a caller with the token: what
// [Config.Audit] receives.
type AuditEvent struct {
	Time   time.Time
	Who    string // "admin API token", and the who= of a dead letter
	Remote string
	// Action is retry, skip, dead-letter, pause, resume or flood-resume.
	Action string
	// Target is what it acted on: the consumer, topic, partition,
	// offset, the kill switch's state.
	Target string
	// Status is the answer's HTTP status; Result is "ok", or the error.
	Status int
	Result string
}

// auditWriter keeps the status of an answer and the start of an error's
// body.
type auditWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *auditWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 400 && w.body.Len() < 1024 {
		w.body.Write(b[:min(len(b), 1024-w.body.Len())])
	}
	return w.ResponseWriter.Write(b)
}

// audited runs a change and hands what came of it to Config.Audit.
func (h *Handler) audited(action string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.audit == nil {
			next(w, r)
			return
		}
		aw := &auditWriter{ResponseWriter: w}
		next(aw, r)
		q := r.URL.Query()
		who := "admin API token"
		if v := strings.TrimSpace(q.Get("who")); v != "" {
			who += " (who=" + truncate(v, 100) + ")"
		}
		var parts []string
		add := func(k, v string) {
			if v != "" {
				parts = append(parts, k+" "+truncate(v, 200))
			}
		}
		add("consumer", q.Get("consumer"))
		add("topic", r.PathValue("topic"))
		add("partition", r.PathValue("partition"))
		add("offset", q.Get("offset"))
		add("enabled", q.Get("enabled"))
		e := AuditEvent{Time: time.Now().UTC(), Who: who, Remote: r.RemoteAddr, Action: action, Target: strings.Join(parts, ", "), Status: aw.status, Result: "ok"}
		if aw.status >= 400 {
			var body struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(aw.body.Bytes(), &body)
			e.Result = "failed: " + body.Error
		}
		h.audit(e)
	}
}
