package console

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/consumer"
)

// partitionRow is one partition of the consumer page. Its fields are
// named, not an embedded consumer.Partition: in a template, .Partition of
// the embedding would be the whole struct, not the partition's number.
type partitionRow struct {
	Topic           string
	Partition       int32
	State           consumer.PartitionState
	Paused          consumer.PauseReason // why, when it says more than State
	OperatorPaused  bool                 // paused by Pause: the button resumes
	BufferedRecords int
	Committed, Lag  int64
	Stuck           *consumer.Stuck
	For             string // how long it has been stuck
}

// retryRow is a record a share-group member retries in place.
type retryRow struct {
	consumer.Stuck
	For string // how long it has been retried
}

type consumerData struct {
	Name       string
	Stats      consumer.Stats
	Partitions []partitionRow
	// Retrying is, for a share-group member (Stats.ShareGroup), the
	// records it retries in place: it owns no partition.
	Retrying []retryRow
	Message  string
	Error    string
	Now      time.Time
	Live     liveView
}

func (h *Handler) consumerOf(w http.ResponseWriter, r *http.Request) (string, admin.Consumer, bool) {
	name := r.PathValue("name")
	c, ok := h.cfg.Consumers[name]
	if !ok {
		h.fail(w, r, http.StatusNotFound, "no such consumer")
		return "", nil, false
	}
	return name, c, true
}

func (h *Handler) consumerPage(w http.ResponseWriter, r *http.Request) {
	name, c, ok := h.consumerOf(w, r)
	if !ok {
		return
	}
	var msg string
	if r.URL.Query().Has("done") {
		msg = h.lastAction(name)
	}
	h.renderConsumer(w, r, http.StatusOK, name, c, msg, "")
}

func (h *Handler) renderConsumer(w http.ResponseWriter, r *http.Request, status int, name string, c admin.Consumer, msg, errMsg string) {
	st := c.Stats()
	now := time.Now()
	d := &consumerData{Name: name, Stats: st, Now: now, Message: msg, Error: errMsg,
		Live: h.live.view(h.live.samples(name), r.URL.Query().Get("live") == "1")}
	stuck := map[string]*consumer.Stuck{}
	for i := range st.Stuck {
		s := &st.Stuck[i]
		s.LastError = visible(s.LastError)
		if k := fmt.Sprintf("%s/%d", s.Topic, s.Partition); stuck[k] == nil {
			stuck[k] = s // the lowest offset: the one that holds the commit back
		}
	}
	if st.ShareGroup != nil {
		for _, s := range st.Stuck {
			d.Retrying = append(d.Retrying, retryRow{Stuck: s, For: now.Sub(s.Since).Truncate(time.Second).String()})
		}
	}
	for _, p := range st.Partitions {
		pr := partitionRow{
			Topic: p.Topic, Partition: p.Partition, State: p.State, Paused: p.Paused,
			OperatorPaused:  p.Paused == consumer.PauseOperator,
			BufferedRecords: p.BufferedRecords, Committed: p.Committed, Lag: p.Lag,
			Stuck: stuck[fmt.Sprintf("%s/%d", p.Topic, p.Partition)],
		}
		if string(pr.Paused) == string(pr.State) {
			pr.Paused = "" // "stuck (stuck)" says it twice
		}
		if pr.Stuck != nil {
			pr.For = now.Sub(pr.Stuck.Since).Truncate(time.Second).String()
		}
		d.Partitions = append(d.Partitions, pr)
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i], d.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	h.render(w, r, status, "consumer", d)
}

// afterAction shows the consumer page again (303, so that a reload does
// not repeat the action) or the page with the error.
func (h *Handler) afterAction(w http.ResponseWriter, r *http.Request, name string, c admin.Consumer, msg string, err error) {
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, consumer.ErrNotAssigned):
			status = http.StatusNotFound
		case errors.Is(err, consumer.ErrNotStuck), errors.Is(err, consumer.ErrNotFlooded):
			status = http.StatusConflict
		}
		noteResult(r, err.Error())
		h.renderConsumer(w, r, status, name, c, "", err.Error())
		return
	}
	h.mu.Lock()
	if h.actions == nil {
		h.actions = map[string]string{}
	}
	h.actions[name] = msg
	h.mu.Unlock()
	// The message stays on the server: a link cannot make the page say
	// anything.
	http.Redirect(w, r, h.prefix+"consumers/"+name+"?done=1", http.StatusSeeOther)
}

// lastAction is what the last action on a consumer did.
func (h *Handler) lastAction(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.actions[name]
}

func (h *Handler) setRetry(w http.ResponseWriter, r *http.Request) {
	name, c, ok := h.consumerOf(w, r)
	if !ok {
		return
	}
	var on bool
	switch r.PostForm.Get("enabled") {
	case "on":
		on = true
	case "off":
	default:
		h.fail(w, r, http.StatusBadRequest, "enabled: want on or off")
		return
	}
	was := c.RetryEnabled()
	c.SetRetryEnabled(on)
	h.log.Warn("console: retry kill switch set", "consumer", name, "retry_enabled", on, "was", was, "remote", r.RemoteAddr)
	msg := "retrying is on"
	if !on {
		msg = "retrying is off: transient failures go straight to the dead-letter topic"
	}
	h.afterAction(w, r, name, c, msg, nil)
}

// partitionForm reads topic and partition of a partition action.
func (h *Handler) partitionForm(w http.ResponseWriter, r *http.Request) (string, int32, bool) {
	topic := r.PostForm.Get("topic")
	p, err := strconv.ParseInt(r.PostForm.Get("partition"), 10, 32)
	if !validTopic(topic) || err != nil || p < 0 {
		h.fail(w, r, http.StatusBadRequest, "want a topic and a partition")
		return "", 0, false
	}
	return topic, int32(p), true
}

// stuckForm reads the consumer, partition and offset of an action on the
// record a partition is stuck on.
func (h *Handler) stuckForm(w http.ResponseWriter, r *http.Request) (name string, c admin.Consumer, topic string, p int32, o int64, ok bool) {
	name, c, ok = h.consumerOf(w, r)
	if !ok {
		return
	}
	topic, p, ok = h.partitionForm(w, r)
	if !ok {
		return
	}
	o, err := strconv.ParseInt(r.PostForm.Get("offset"), 10, 64)
	if err != nil || o < 0 {
		h.fail(w, r, http.StatusBadRequest, "offset: want the offset the partition is stuck on")
		return name, c, topic, p, o, false
	}
	return name, c, topic, p, o, true
}

// deadLetter sends the record a partition is stuck on to its dead-letter
// topic; the letter names the console and the caller's address.
func (h *Handler) deadLetter(w http.ResponseWriter, r *http.Request) {
	name, c, topic, p, o, ok := h.stuckForm(w, r)
	if !ok {
		return
	}
	caller, _ := h.callerOf(r)
	who := "console, " + caller.who() + ", " + r.RemoteAddr
	err := c.DeadLetter(topic, p, o, who)
	if err != nil {
		h.log.Warn("console: dead letter refused", "consumer", name, "topic", topic, "partition", p, "offset", o, "remote", r.RemoteAddr, "err", err)
	} else {
		h.log.Warn("console: record sent to the dead-letter topic", "consumer", name, "topic", topic, "partition", p, "offset", o, "remote", r.RemoteAddr)
	}
	h.afterAction(w, r, name, c, fmt.Sprintf("dead-lettered %s[%d] offset %d", topic, p, o), err)
}

func (h *Handler) skip(w http.ResponseWriter, r *http.Request) {
	name, c, topic, p, o, ok := h.stuckForm(w, r)
	if !ok {
		return
	}
	err := c.Skip(topic, p, o)
	if err != nil {
		h.log.Warn("console: skip refused", "consumer", name, "topic", topic, "partition", p, "offset", o, "remote", r.RemoteAddr, "err", err)
	} else {
		h.log.Warn("console: record skipped", "consumer", name, "topic", topic, "partition", p, "offset", o, "remote", r.RemoteAddr)
	}
	h.afterAction(w, r, name, c, fmt.Sprintf("skipped %s[%d] offset %d", topic, p, o), err)
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	h.pauseResume(w, r, "paused", admin.Consumer.Pause)
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	h.pauseResume(w, r, "resumed", admin.Consumer.Resume)
}

func (h *Handler) pauseResume(w http.ResponseWriter, r *http.Request, action string, do func(admin.Consumer, string, int32) error) {
	name, c, ok := h.consumerOf(w, r)
	if !ok {
		return
	}
	topic, p, ok := h.partitionForm(w, r)
	if !ok {
		return
	}
	err := do(c, topic, p)
	if err == nil {
		h.log.Warn("console: partition "+action, "consumer", name, "topic", topic, "partition", p, "remote", r.RemoteAddr)
	}
	h.afterAction(w, r, name, c, fmt.Sprintf("%s[%d] %s", topic, p, action), err)
}

func (h *Handler) resumeFlood(w http.ResponseWriter, r *http.Request) {
	name, c, ok := h.consumerOf(w, r)
	if !ok {
		return
	}
	err := c.ResumeFlood()
	if err == nil {
		h.log.Warn("console: flood guard resumed", "consumer", name, "remote", r.RemoteAddr)
	}
	h.afterAction(w, r, name, c, "the flood guard let the consumer go on", err)
}
