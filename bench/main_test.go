package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBenchSmoke runs the benchmark's core on a small data set, one round per
// ratio, and checks the counts, never the timing. It uses an in-process kfake
// cluster started by run, or the real broker named by ANTIDOTE_KAFKA_BROKERS.
func TestBenchSmoke(t *testing.T) {
	var brokers []string
	if env := strings.TrimSpace(os.Getenv(envBrokers)); env != "" {
		brokers = strings.Split(env, ",")
	}
	o := Options{
		Brokers:      brokers,
		Records:      2000,
		Partitions:   4,
		ValueSize:    200,
		Poison:       []float64{0, 0.01, 0.10},
		Rounds:       1,
		FetchMaxWait: 200 * time.Millisecond,
		Linger:       -1,
		Seed:         1,
		Progress:     testWriter{t},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	res, err := run(ctx, o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(res.Rows) != len(o.Poison) {
		t.Fatalf("got %d rows, want %d", len(res.Rows), len(o.Poison))
	}
	for i, row := range res.Rows {
		wantPills := []int{0, 20, 200}[i]
		if row.Pills != wantPills {
			t.Errorf("poison %g: %d pills produced, want %d", row.Poison, row.Pills, wantPills)
		}
		if len(row.Runs) != 2 {
			t.Fatalf("poison %g: %d runs, want 2", row.Poison, len(row.Runs))
		}
		for _, r := range row.Runs {
			switch r.Consumer {
			case "bare":
				if r.Seen != o.Records || r.DecodeErrors != row.Pills {
					t.Errorf("poison %g: bare saw %d records with %d decode errors, want %d with %d", row.Poison, r.Seen, r.DecodeErrors, o.Records, row.Pills)
				}
			case "antidote":
				if got := r.Processed + r.DeadLettered; got != uint64(o.Records) {
					t.Errorf("poison %g: antidote processed %d + dead-lettered %d = %d, want %d", row.Poison, r.Processed, r.DeadLettered, got, o.Records)
				}
				if r.DeadLettered != uint64(row.Pills) {
					t.Errorf("poison %g: antidote dead-lettered %d, want %d (the poison pills)", row.Poison, r.DeadLettered, row.Pills)
				}
			default:
				t.Errorf("unknown consumer %q", r.Consumer)
			}
			if r.Fetched < int64(o.Records) {
				t.Errorf("poison %g: %s fetched %d records, want at least %d", row.Poison, r.Consumer, r.Fetched, o.Records)
			}
		}
		if row.DLQRecords != int64(row.Pills) {
			t.Errorf("poison %g: dead-letter topic holds %d records, want %d", row.Poison, row.DLQRecords, row.Pills)
		}
	}
}

func TestDatasetPoison(t *testing.T) {
	for _, ratio := range []float64{0, 0.01, 0.1, 1} {
		a := newDataset(7, 3, 1000, 200, ratio)
		b := newDataset(7, 3, 1000, 200, ratio)
		bad := 0
		for i := range 1000 {
			_, va := a.record(i)
			_, vb := b.record(i)
			if string(va) != string(vb) {
				t.Fatalf("ratio %g: record %d differs between runs with the same seed", ratio, i)
			}
			var v Order
			if err := json.Unmarshal(va, &v); err != nil {
				bad++
				if !a.poison[i] {
					t.Fatalf("ratio %g: record %d is not a poison pill but does not decode: %v", ratio, i, err)
				}
			} else if a.poison[i] {
				t.Fatalf("ratio %g: poison pill %d decodes", ratio, i)
			}
		}
		if want := poisonCount(1000, ratio); bad != want || a.pills != want {
			t.Errorf("ratio %g: %d undecodable records, %d pills, want %d", ratio, bad, a.pills, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	t.Setenv(envBrokers, "")
	o, err := parseFlags([]string{"-poison", "0, 0.5", "-o", "json", "-brokers", "a:1,b:2"}, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Poison) != 2 || o.Poison[1] != 0.5 || o.Output != "json" || len(o.Brokers) != 2 || o.Records != 200000 {
		t.Errorf("parsed %+v", o)
	}
	for _, bad := range [][]string{{"-poison", "x"}, {"-poison", "1.5"}, {"-o", "xml"}, {"-records", "0"}, {"-timeout", "0s"}, {"-linger", "-1s"}} {
		if _, err := parseFlags(bad, testWriter{t}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
