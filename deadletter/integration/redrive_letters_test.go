package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// Letters picked one by one: only they are redriven, in a group of their
// own, and a second run of the same pick redrives nothing more.
func TestIntegrationRedriveLetters(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	var pick []deadletter.Position
	for _, r := range readAll(t, fx.cl, fx.dlq) {
		if v := string(r.Value); v == "antidote-2" || v == "antidote-1" {
			pick = append(pick, deadletter.Position{Partition: r.Partition, Offset: r.Offset})
		}
	}
	cfg := deadletter.RedriveConfig{Topic: fx.dlq, Letters: pick, IdleTimeout: 3 * time.Second}
	if g, all := cfg.DefaultGroup(), (&deadletter.RedriveConfig{Topic: fx.dlq}).DefaultGroup(); g == all {
		t.Fatalf("the pick shares the group %s of a redrive of everything", g)
	}
	dry := cfg
	dry.DryRun = true
	res, err := deadletter.Redrive(ctx, fx.cl, dry)
	if err != nil || res.Redriven != 2 || res.Refused != 0 {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if res, err = deadletter.Redrive(ctx, fx.cl, cfg); err != nil || res.Redriven != 2 {
		t.Fatalf("redrive: %+v, %v", res, err)
	}
	got := map[string]int{}
	for _, r := range readAll(t, fx.cl, fx.src) {
		got[string(r.Value)]++
	}
	if len(got) != 2 || got["antidote-2"] != 1 || got["antidote-1"] != 1 {
		t.Errorf("redriven %v, want antidote-2 and antidote-1 once each", got)
	}
	if res, err = deadletter.Redrive(ctx, fx.cl, cfg); err != nil || res.Redriven != 0 {
		t.Errorf("second run: %+v, %v", res, err)
	}
	bad := cfg
	bad.Letters = []deadletter.Position{{Partition: 9, Offset: 0}}
	if _, err := deadletter.Redrive(ctx, fx.cl, bad); err == nil {
		t.Error("a letter in a partition the topic does not have: no error")
	}
}
