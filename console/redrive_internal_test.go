package console

import (
	"fmt"
	"testing"
	"time"
)

// TestJobsPrune: finished redrives go an hour after they ended, and the
// oldest finished ones past maxJobs; running ones stay.
func TestJobsPrune(t *testing.T) {
	now := time.Now()
	js := newJobs()
	add := func(id string, done bool, ended time.Time) {
		js.list = append(js.list, &job{ID: id, done: done, ended: ended})
	}
	add("old-done", true, now.Add(-2*time.Hour))
	add("running", false, time.Time{})
	for i := range maxJobs + 3 {
		add(fmt.Sprint("done-", i), true, now.Add(-time.Minute))
	}
	js.prune(now)
	if len(js.list) != maxJobs {
		t.Fatalf("%d jobs kept, want %d", len(js.list), maxJobs)
	}
	if js.list[0].ID != "running" {
		t.Errorf("first job kept %s, want the running one", js.list[0].ID)
	}
	for _, j := range js.list {
		if j.ID == "old-done" || j.ID == "done-0" || j.ID == "done-1" || j.ID == "done-2" {
			t.Errorf("job %s kept: finished an hour ago, or among the oldest past %d", j.ID, maxJobs)
		}
	}
}
