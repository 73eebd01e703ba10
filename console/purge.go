package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/antidote-kafka/antidote/deadletter"
)

// A purge deletes the letters a finished redrive of the console redrove,
// as antidote dlq purge --redriven does: [deadletter.RedrivenPrefix] finds
// per partition the offset below which every letter was redriven, and
// Kafka's DeleteRecords moves the log start up to it. The plan page shows
// it; the POST deletes no more than the plan it confirms, and no more than
// RedrivenPrefix finds again then.

// purgeRow is one partition of a purge: what goes, and where and why it
// stops.
type purgeRow struct {
	deadletter.RedrivenPartition
	// Why is Stop in words.
	Why string
}

// Last is the last offset deleted.
func (r purgeRow) Last() int64 { return r.Below - 1 }

// Kept is how many letters below the redrive's progress stay.
func (r purgeRow) Kept() int64 { return r.Progress - r.Below }

type purgeData struct {
	Job   jobView
	Rows  []purgeRow
	Total int64
	// Error is why there is nothing to purge, or why the purge failed.
	Error string
	// Deleted: the rows are what was deleted.
	Deleted bool
}

// BelowValues are the rows with letters to delete as the form's values.
func (d *purgeData) BelowValues() []string {
	var out []string
	for _, r := range d.Rows {
		if r.Records() > 0 {
			out = append(out, fmt.Sprintf("%d:%d", r.Partition, r.Below))
		}
	}
	return out
}

func stopWords(stop string) string {
	switch stop {
	case "":
		return ""
	case deadletter.NotSelected:
		return "the redrive passed over it (its filter, or not a picked letter)"
	}
	return "the redrive refused it: " + stop
}

// purgeable returns the finished redrive of r's path, or answers why not.
func (h *Handler) purgeable(w http.ResponseWriter, r *http.Request) *job {
	j := h.jobs.get(r.PathValue("id"))
	switch {
	case j == nil:
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("no such redrive (the console keeps the last %d, for an hour after they end)", maxJobs))
		return nil
	case !j.view().Done:
		h.fail(w, r, http.StatusConflict, "the redrive is running: purge its letters once it has finished")
		return nil
	case j.relativeUntil:
		// Run before, with the same group, it passed over letters that
		// its filter selects now.
		h.fail(w, r, http.StatusConflict, "the redrive's until is relative to when it ran: a run of the same redrive at another time passed over letters this one selects, "+
			"so the console cannot tell which letters were redriven. Redrive with an until of a time (RFC 3339) to purge afterwards.")
		return nil
	}
	return j
}

// plan finds what a purge of j deletes. On an error it answers and
// returns nil.
func (h *Handler) plan(w http.ResponseWriter, r *http.Request, j *job) *purgeData {
	ctx := r.Context()
	cl, done, err := h.reader(ctx)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err.Error())
		return nil
	}
	defer done()
	cfg := j.cfg
	cfg.IdleTimeout = h.cfg.IdleTimeout
	d := &purgeData{Job: j.view()}
	found, err := deadletter.RedrivenPrefix(ctx, cl, cfg)
	switch {
	case errors.Is(err, deadletter.ErrNoProgress):
		d.Error = fmt.Sprintf("nothing to purge: the redrive group %s has no progress on %s (the redrive read no letter)", j.Group, j.Topic)
		return d
	case err != nil:
		h.fail(w, r, http.StatusBadGateway, strings.ReplaceAll(err.Error(), "deadletter: ", ""))
		return nil
	}
	for _, p := range found {
		d.Rows = append(d.Rows, purgeRow{RedrivenPartition: p, Why: stopWords(p.Stop)})
		d.Total += p.Records()
	}
	return d
}

// purgePage shows what a purge of the letters of a finished redrive
// deletes, per partition, and where and why it stops; its form deletes.
func (h *Handler) purgePage(w http.ResponseWriter, r *http.Request) {
	j := h.purgeable(w, r)
	if j == nil {
		return
	}
	if d := h.plan(w, r, j); d != nil {
		h.render(w, r, http.StatusOK, "purge", d)
	}
}

// purge deletes the letters of the plan its form confirms, in each
// partition no further than the redrive redrove now.
func (h *Handler) purge(w http.ResponseWriter, r *http.Request) {
	j := h.purgeable(w, r)
	if j == nil {
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		h.fail(w, r, http.StatusBadRequest, "a purge needs its confirmation: tick the box of its plan")
		return
	}
	asked := map[int32]int64{}
	for _, s := range r.PostForm["below"] {
		a, b, ok := strings.Cut(s, ":")
		p, perr := strconv.ParseInt(a, 10, 32)
		o, oerr := strconv.ParseInt(b, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("below %q: want PARTITION:OFFSET", deadletter.Truncate(s, 32)))
			return
		}
		asked[int32(p)] = o
	}
	if len(asked) == 0 {
		h.fail(w, r, http.StatusBadRequest, "nothing to purge: open the plan of the purge first")
		return
	}
	d := h.plan(w, r, j)
	if d == nil {
		return
	}
	// The plan again, bounded by the one confirmed: never more than the
	// operator saw, nor than was redriven.
	plan := kadm.Offsets{}
	var rows []purgeRow
	var total int64
	var parts []string
	for _, row := range d.Rows {
		o, ok := asked[row.Partition]
		if !ok {
			continue
		}
		row.Below = min(row.Below, o)
		if row.Records() == 0 {
			continue
		}
		plan.AddOffset(j.Topic, row.Partition, row.Below, -1)
		rows = append(rows, row)
		total += row.Records()
		parts = append(parts, fmt.Sprintf("partition %d below %d", row.Partition, row.Below))
	}
	d.Rows, d.Total, d.Deleted = rows, total, true
	if total == 0 {
		noteResult(r, "nothing deleted: the letters of the plan are gone already")
		h.render(w, r, http.StatusOK, "purge", d)
		return
	}
	cl, done, err := h.reader(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	resp, err := kadm.NewClient(cl).DeleteRecords(r.Context(), plan)
	done()
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, fmt.Sprintf("deleting letters of %s: %v", j.Topic, err))
		return
	}
	noteResult(r, fmt.Sprintf("deleted %d letters of %s (%s)", total, j.Topic, strings.Join(parts, ", ")))
	h.render(w, r, http.StatusOK, "purge", d)
}
