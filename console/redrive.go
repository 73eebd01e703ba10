package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// A redrive is [deadletter.Redrive], as antidote dlq redrive runs it: the
// same loop guard (MaxRedrives), the same progress group for the same
// filter (a redrive stopped here or by the command resumes in either).

// redriveForm is what the redrive form posts: the filter of the table,
// or letters picked one by one, and the target.
type redriveForm struct {
	Filter  filterForm
	Letters []deadletter.Position
	To      string
}

func readRedrive(r *http.Request) (redriveForm, error) {
	f, err := readFilter(r.PostForm)
	if err != nil {
		return redriveForm{}, err
	}
	rf := redriveForm{Filter: f, To: strings.TrimSpace(r.PostForm.Get("to"))}
	if f.Key != "" {
		return rf, errors.New("a redrive selects by the letter filter, not by key: pick the letters of that key in the table")
	}
	if rf.To != "" && !validTopic(rf.To) {
		return rf, fmt.Errorf("to: %q is not a legal topic name", deadletter.Truncate(rf.To, 64))
	}
	letters := r.PostForm["letter"]
	switch r.PostForm.Get("scope") {
	case "filter":
		letters = nil
	case "picked":
		if len(letters) == 0 {
			return rf, errors.New("no letter picked: tick the letters to redrive in the table, or redrive every letter the filter selects")
		}
	default:
		return rf, errors.New("scope: want picked or filter")
	}
	if len(letters) > 10000 {
		return rf, errors.New("too many letters picked (at most 10000): redrive by filter")
	}
	for _, s := range letters {
		a, b, ok := strings.Cut(s, ":")
		p, perr := strconv.ParseInt(a, 10, 32)
		o, oerr := strconv.ParseInt(b, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			return rf, fmt.Errorf("letter %q: want PARTITION:OFFSET", deadletter.Truncate(s, 32))
		}
		rf.Letters = append(rf.Letters, deadletter.Position{Partition: int32(p), Offset: o})
	}
	return rf, nil
}

func (rf redriveForm) config(topic string) deadletter.RedriveConfig {
	return deadletter.RedriveConfig{Topic: topic, To: rf.To, Filter: rf.Filter.Filter, Letters: rf.Letters}
}

// LetterValues are the picked letters as the form's values.
func (rf redriveForm) LetterValues() []string {
	out := make([]string, len(rf.Letters))
	for i, l := range rf.Letters {
		out[i] = fmt.Sprintf("%d:%d", l.Partition, l.Offset)
	}
	return out
}

type dryRunData struct {
	Topic  string
	Form   redriveForm
	Result deadletter.RedriveResult
	Error  string
	Group  string
}

// redrive runs a dry run (action=dry-run), whose page asks to confirm, or
// starts the redrive (action=redrive) and shows its progress.
func (h *Handler) redrive(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if !validTopic(topic) {
		h.fail(w, r, http.StatusBadRequest, "not a legal topic name")
		return
	}
	rf, err := readRedrive(r)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	cfg := rf.config(topic)
	if err := cfg.Validate(); err != nil {
		h.fail(w, r, http.StatusBadRequest, strings.ReplaceAll(err.Error(), "deadletter: redrive: ", ""))
		return
	}
	cfg.IdleTimeout = h.cfg.IdleTimeout
	switch r.PostForm.Get("action") {
	case "dry-run":
		ctx := r.Context()
		cl, done, err := h.reader(ctx)
		if err != nil {
			h.fail(w, r, http.StatusServiceUnavailable, err.Error())
			return
		}
		defer done()
		cfg.DryRun = true
		res, err := deadletter.Redrive(ctx, cl, cfg)
		d := &dryRunData{Topic: topic, Form: rf, Result: res, Group: cfg.DefaultGroup()}
		status := http.StatusOK
		if err != nil {
			d.Error, status = strings.ReplaceAll(err.Error(), "deadletter: ", ""), http.StatusBadGateway
			noteResult(r, d.Error)
		} else {
			noteResult(r, fmt.Sprintf("dry run: %d to redrive", res.Redriven))
		}
		h.render(w, r, status, "dryrun", d)
	case "redrive":
		if r.PostForm.Get("confirm") != "yes" {
			h.fail(w, r, http.StatusBadRequest, "a redrive needs its confirmation: run the dry run first")
			return
		}
		j, err := h.jobs.start(h, cfg, r.RemoteAddr)
		if err != nil {
			h.fail(w, r, http.StatusServiceUnavailable, err.Error())
			return
		}
		noteResult(r, "started redrive "+j.ID)
		http.Redirect(w, r, h.prefix+"jobs/"+j.ID, http.StatusSeeOther)
	default:
		h.fail(w, r, http.StatusBadRequest, "action: want dry-run or redrive")
	}
}

// job is one redrive running or done.
type job struct {
	ID      string
	Topic   string
	Group   string
	Started time.Time
	Form    string // what was asked, in words
	// cfg is the redrive as asked, its Group set and its filter's relative
	// bounds unresolved: a purge of its letters replays it, resolved then.
	cfg deadletter.RedriveConfig
	// relativeUntil: the filter's Until was relative to Started (MinAge).
	relativeUntil bool

	mu     sync.Mutex
	res    deadletter.RedriveResult
	err    error
	done   bool
	ended  time.Time
	cancel context.CancelFunc
	exited chan struct{}
}

// jobView is a job as its page shows it.
type jobView struct {
	ID, Topic, Group, Form string
	Started, Ended         time.Time
	Result                 deadletter.RedriveResult
	Error                  string
	Done                   bool
	Percent                int64
	// RelativeUntil: its letters cannot be purged (see purgeable).
	RelativeUntil bool
}

func (j *job) view() jobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := jobView{ID: j.ID, Topic: j.Topic, Group: j.Group, Form: j.Form, Started: j.Started, Ended: j.ended, Result: j.res, Done: j.done, RelativeUntil: j.relativeUntil}
	if j.err != nil {
		v.Error = strings.ReplaceAll(j.err.Error(), "deadletter: ", "")
	}
	if j.res.Remaining > 0 {
		v.Percent = int64(j.res.Scanned) * 100 / j.res.Remaining
	} else if j.done {
		v.Percent = 100
	}
	return v
}

type jobs struct {
	mu   sync.Mutex
	list []*job // the newest last; at most maxJobs kept
}

// The console keeps at most maxJobs redrives, and a finished one for
// jobTTL after it ended; a running one is always kept.
const (
	maxJobs = 20
	jobTTL  = time.Hour
)

// prune drops the finished redrives that ended jobTTL ago, then the
// oldest finished ones past maxJobs. js.mu is held.
func (js *jobs) prune(now time.Time) {
	js.list = slices.DeleteFunc(js.list, func(j *job) bool {
		v := j.view()
		return v.Done && now.Sub(v.Ended) >= jobTTL
	})
	for i := 0; len(js.list) > maxJobs && i < len(js.list); {
		if js.list[i].view().Done {
			js.list = slices.Delete(js.list, i, i+1)
			continue
		}
		i++
	}
}

func newJobs() *jobs { return &jobs{} }

func (js *jobs) get(id string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.prune(time.Now())
	for _, j := range js.list {
		if j.ID == id {
			return j
		}
	}
	return nil
}

// start runs cfg in a goroutine, with a client of its own.
func (js *jobs) start(h *Handler, cfg deadletter.RedriveConfig, remote string) (*job, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if cfg.Group == "" {
		cfg.Group = cfg.DefaultGroup()
	}
	js.mu.Lock()
	for _, j := range js.list {
		if j.Group == cfg.Group && !j.view().Done {
			js.mu.Unlock()
			return nil, fmt.Errorf("a redrive with the same selection (group %s) is running: see its progress at %sjobs/%s", cfg.Group, h.prefix, j.ID)
		}
	}
	js.mu.Unlock()
	cl, err := kgo.NewClient(append(slices.Clone(h.cfg.ClientOpts), readOpts()...)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &job{
		ID: hex.EncodeToString(b[:]), Topic: cfg.Topic, Group: cfg.Group, Started: time.Now(),
		Form: describe(cfg), relativeUntil: cfg.Filter.MinAge > 0, cancel: cancel, exited: make(chan struct{}),
	}
	// Kept as asked, relative bounds unresolved: a purge resolves them when
	// it runs (deadletter.RedrivenPrefix), later than any run of this
	// redrive group, so a relative since then selects fewer letters, never
	// one a later run of the group passed over. (A relative until would
	// select more: relativeUntil refuses the purge.)
	j.cfg = cfg
	cfg.Progress = func(r deadletter.RedriveResult) {
		// The redrive goes on counting in these while the job's page
		// reads them.
		r.Targets, r.Refusals = maps.Clone(r.Targets), slices.Clone(r.Refusals)
		j.mu.Lock()
		j.res = r
		j.mu.Unlock()
	}
	js.mu.Lock()
	js.list = append(js.list, j)
	js.prune(time.Now())
	js.mu.Unlock()
	h.log.Warn("console: redrive started", "topic", cfg.Topic, "group", cfg.Group, "selection", j.Form, "remote", remote)
	go func() {
		defer close(j.exited)
		defer cl.Close()
		res, err := deadletter.Redrive(ctx, cl, cfg)
		j.mu.Lock()
		j.res, j.err, j.done, j.ended = res, err, true, time.Now()
		j.mu.Unlock()
		h.log.Warn("console: redrive ended", "topic", cfg.Topic, "group", cfg.Group, "redriven", res.Redriven, "refused", res.Refused, "skipped", res.Skipped, "err", err)
	}()
	return j, nil
}

func (js *jobs) stopAll() {
	js.mu.Lock()
	list := slices.Clone(js.list)
	js.mu.Unlock()
	for _, j := range list {
		j.cancel()
	}
	for _, j := range list {
		<-j.exited
	}
}

// describe says what a redrive selects.
func describe(cfg deadletter.RedriveConfig) string {
	var parts []string
	if len(cfg.Letters) > 0 {
		parts = append(parts, fmt.Sprintf("%d letters picked", len(cfg.Letters)))
	}
	if c := cfg.Filter.Canonical(); c != "" {
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		parts = append(parts, "every letter")
	}
	s := strings.Join(parts, "; ")
	if cfg.To != "" {
		s += " → " + cfg.To
	}
	return s
}

func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request) {
	j := h.jobs.get(r.PathValue("id"))
	if j == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no such redrive (the console keeps the last %d)", maxJobs))
		return
	}
	h.render(w, r, http.StatusOK, "job", j.view())
}

// stopJob interrupts a redrive: it commits the batch in flight, and the
// same redrive run again resumes.
func (h *Handler) stopJob(w http.ResponseWriter, r *http.Request) {
	j := h.jobs.get(r.PathValue("id"))
	if j == nil {
		h.fail(w, r, http.StatusNotFound, "no such redrive")
		return
	}
	h.log.Warn("console: redrive stopped", "topic", j.Topic, "group", j.Group, "remote", r.RemoteAddr)
	j.cancel()
	select {
	case <-j.exited:
	case <-time.After(30 * time.Second):
	}
	http.Redirect(w, r, h.prefix+"jobs/"+j.ID, http.StatusSeeOther)
}
