package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the bench's consumer process: run
// re-executes it with childEnv=1.
func TestMain(m *testing.M) {
	if isChild() {
		os.Exit(childMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchSmoke runs the benchmark on a small data set, two rounds per
// ratio, each consumer in its own process, and checks the accounting and the
// result's fields, never the timing. It uses an in-process kfake cluster
// started by run, or the real broker named by ANTIDOTE_KAFKA_BROKERS.
func TestBenchSmoke(t *testing.T) {
	var brokers []string
	if env := strings.TrimSpace(os.Getenv(envBrokers)); env != "" {
		brokers = strings.Split(env, ",")
	}
	o := Options{
		Brokers:       brokers,
		Records:       2000,
		Partitions:    4,
		ValueSize:     200,
		Poison:        []float64{0, 0.01, 0.10},
		Rounds:        2,
		FetchMaxWait:  200 * time.Millisecond,
		Linger:        -1,
		Seed:          1,
		CPUProfileDir: t.TempDir(),
		Progress:      testWriter{t},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := run(ctx, o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(res.Rows) != len(o.Poison) {
		t.Fatalf("got %d rows, want %d", len(res.Rows), len(o.Poison))
	}
	if !res.FetchedOK {
		t.Errorf("FetchedOK is false: a consumer fetched other than the records produced")
	}
	for i, row := range res.Rows {
		wantPills := []int{0, 20, 200}[i]
		if row.Pills != wantPills {
			t.Errorf("poison %g: %d pills produced, want %d", row.Poison, row.Pills, wantPills)
		}
		if row.Produced != int64(o.Records) || !row.Complete || !row.FetchedOK {
			t.Errorf("poison %g: produced %d (want %d), complete %v, fetched ok %v", row.Poison, row.Produced, o.Records, row.Complete, row.FetchedOK)
		}
		if len(row.Runs) != 2*o.Rounds {
			t.Fatalf("poison %g: %d runs, want %d", row.Poison, len(row.Runs), 2*o.Rounds)
		}
		for j, r := range row.Runs {
			if want := []string{"bare", "antidote"}[j%2]; r.Consumer != want || r.Round != j/2+1 {
				t.Errorf("poison %g: run %d is %s round %d, want %s round %d", row.Poison, j, r.Consumer, r.Round, want, j/2+1)
			}
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
			}
			if r.Fetched != row.Produced {
				t.Errorf("poison %g: %s round %d fetched %d records, want %d", row.Poison, r.Consumer, r.Round, r.Fetched, row.Produced)
			}
			if !r.Complete || r.CPUSeconds <= 0 || r.Seconds <= 0 || r.ProcessSeconds < r.SecondsInclJoin {
				t.Errorf("poison %g: %s round %d: complete %v, CPU %gs, window %gs, process %gs (incl. join %gs)",
					row.Poison, r.Consumer, r.Round, r.Complete, r.CPUSeconds, r.Seconds, r.ProcessSeconds, r.SecondsInclJoin)
			}
			if runtime.GOOS == "linux" && r.MaxRSSBytes < 1<<20 {
				t.Errorf("poison %g: %s round %d: peak RSS %d bytes", row.Poison, r.Consumer, r.Round, r.MaxRSSBytes)
			}
			if st, err := os.Stat(r.Profile); err != nil || st.Size() == 0 {
				t.Errorf("poison %g: %s round %d: CPU profile %q: %v", row.Poison, r.Consumer, r.Round, r.Profile, err)
			}
		}
		for _, s := range []Summary{row.Bare, row.Antidote} {
			if s.Runs != o.Rounds || s.FetchedMin != row.Produced || s.FetchedMax != row.Produced || s.CPUSeconds <= 0 {
				t.Errorf("poison %g: summary %+v", row.Poison, s)
			}
		}
		if row.Ratio < row.RatioMin || row.Ratio > row.RatioMax || row.RatioMin <= 0 {
			t.Errorf("poison %g: ratio %g outside its spread %g-%g", row.Poison, row.Ratio, row.RatioMin, row.RatioMax)
		}
		if (row.CPUPerLetterMicros != nil) != (row.Pills > 0) || (row.BareCPUPerPillMicros != nil) != (row.Pills > 0) {
			t.Errorf("poison %g: CPU per letter set: %v, want %v", row.Poison, row.CPUPerLetterMicros != nil, row.Pills > 0)
		}
		if row.DLQRecords != int64(row.Pills)*int64(o.Rounds) {
			t.Errorf("poison %g: dead-letter topic holds %d records, want %d", row.Poison, row.DLQRecords, row.Pills*o.Rounds)
		}
	}

	// The JSON output carries the fields the README documents.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		FetchedOK *bool `json:"fetched_ok"`
		Rows      []map[string]json.RawMessage
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.FetchedOK == nil || len(out.Rows) != 3 {
		t.Fatalf("JSON: %s", b)
	}
	for _, k := range []string{"poison", "pills", "produced", "bare", "antidote", "ratio", "ratio_min", "ratio_max", "fetched_ok", "runs", "cpu_us_per_letter", "cpu_us_per_letter_min", "cpu_us_per_letter_max"} {
		if _, ok := out.Rows[2][k]; !ok {
			t.Errorf("JSON row lacks %q", k)
		}
	}
	var buf bytes.Buffer
	printTable(&buf, res)
	if !strings.Contains(buf.String(), "= produced") || strings.Contains(buf.String(), "MISMATCH") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestSummarize checks the medians, the pairing of rounds, the fetched check
// and the CPU per dead letter on made-up runs.
func TestSummarize(t *testing.T) {
	mk := func(kind string, round int, rps, cpu float64, fetched int64) Run {
		return Run{Consumer: kind, Round: round, RecordsPerSec: rps, RecordsPerSecIJ: rps / 2, CPUSeconds: cpu, Fetched: fetched, Complete: true}
	}
	res := &Result{FetchedOK: true}
	zero := Row{Poison: 0, Produced: 1000, Complete: true, Runs: []Run{
		mk("bare", 1, 100, 1.0, 1000), mk("antidote", 1, 150, 2.0, 1000),
		mk("bare", 2, 200, 1.2, 1000), mk("antidote", 2, 200, 2.2, 1000),
		mk("bare", 3, 400, 1.1, 1000), mk("antidote", 3, 200, 2.1, 1000),
	}}
	summarize(res, &zero)
	if zero.Bare.RecordsPerSec != 200 || zero.Antidote.RecordsPerSec != 200 || zero.Bare.CPUSeconds != 1.1 {
		t.Errorf("medians: bare %+v antidote %+v", zero.Bare, zero.Antidote)
	}
	// Ratios by round: 1.5, 1.0, 0.5.
	if zero.Ratio != 1.0 || zero.RatioMin != 0.5 || zero.RatioMax != 1.5 || !zero.Pass || !zero.FetchedOK {
		t.Errorf("ratio %g (%g-%g), pass %v, fetched ok %v", zero.Ratio, zero.RatioMin, zero.RatioMax, zero.Pass, zero.FetchedOK)
	}
	if got := zero.Antidote.CPUMicrosPerRecord; got < 2099 || got > 2101 {
		t.Errorf("antidote µs per record = %g, want 2100", got)
	}
	ten := Row{Poison: 0.1, Pills: 100, Produced: 1000, Complete: true, Runs: []Run{
		mk("bare", 1, 100, 1.0, 1000), mk("antidote", 1, 90, 2.5, 1300),
		mk("bare", 2, 100, 1.0, 1000), mk("antidote", 2, 80, 2.4, 1000),
	}}
	summarize(res, &ten)
	if ten.FetchedOK || res.FetchedOK || ten.Antidote.FetchedMax != 1300 || ten.Antidote.FetchedMin != 1000 {
		t.Errorf("a run fetched 1300 of 1000: fetched ok %v/%v, range %d-%d", ten.FetchedOK, res.FetchedOK, ten.Antidote.FetchedMin, ten.Antidote.FetchedMax)
	}
	if ten.Pass || math.Abs(ten.Ratio-0.85) > 1e-9 {
		t.Errorf("ratio %g pass %v", ten.Ratio, ten.Pass)
	}
	res.Rows = []Row{zero, ten}
	letterCosts(res)
	// Antidote: (2.45 - 2.1) s / 100 letters = 3500 µs; bare: (1.0 - 1.1) s / 100 = -1000 µs.
	if l := res.Rows[1].CPUPerLetterMicros; l == nil || *l < 3499 || *l > 3501 {
		t.Errorf("CPU per letter = %v, want 3500", l)
	}
	if p := res.Rows[1].BareCPUPerPillMicros; p == nil || *p > -999 || *p < -1001 {
		t.Errorf("bare CPU per pill = %v, want -1000", p)
	}
	// By round: (2.5 - 2.0) s / 100 = 5000 µs and (2.4 - 2.2) s / 100 = 2000 µs.
	if lo, hi := res.Rows[1].CPUPerLetterMin, res.Rows[1].CPUPerLetterMax; lo == nil || hi == nil || math.Abs(*lo-2000) > 1e-6 || math.Abs(*hi-5000) > 1e-6 {
		t.Errorf("CPU per letter by round: %v to %v, want 2000 to 5000", lo, hi)
	}
	if res.Rows[0].CPUPerLetterMicros != nil {
		t.Error("CPU per letter set at 0%")
	}
}

// TestFetchedOK: each consumer fetches each record once.
func TestFetchedOK(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		fetched int64
		want    bool
	}{
		{"bare", 1000, true}, {"bare", 1001, false}, {"bare", 999, false},
		{"antidote", 1000, true}, {"antidote", 1001, false}, {"antidote", 999, false},
	} {
		if got := fetchedOK(Run{Consumer: tc.kind, Fetched: tc.fetched}, 1000); got != tc.want {
			t.Errorf("%s fetched %d of 1000: ok %v, want %v", tc.kind, tc.fetched, got, tc.want)
		}
	}
}

// TestChildBadSpec: a child reports a bad spec as an error on stdout, with a
// non-zero exit code.
func TestChildBadSpec(t *testing.T) {
	var out, errb bytes.Buffer
	spec := `{"consumer":"nope","deadline":"` + time.Now().Add(time.Minute).Format(time.RFC3339) + `"}`
	if code := childMain(strings.NewReader(spec), &out, &errb); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	var res childResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || !strings.Contains(res.Error, `unknown consumer "nope"`) {
		t.Errorf("result %q: %v", out.String(), err)
	}
	if code := childMain(strings.NewReader("not json"), &out, &errb); code != 2 {
		t.Errorf("exit code %d on a bad spec, want 2", code)
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
	if len(o.Poison) != 2 || o.Poison[1] != 0.5 || o.Output != "json" || len(o.Brokers) != 2 || o.Records != defaultRecords || o.Rounds != 5 {
		t.Errorf("parsed %+v", o)
	}
	if o, err := parseFlags(nil, testWriter{t}); err != nil || o.Records != kfakeRecords || len(o.Brokers) != 0 {
		t.Errorf("no brokers: records %d, brokers %q, err %v; want %d records on kfake", o.Records, o.Brokers, err, kfakeRecords)
	}
	if o, err := parseFlags([]string{"-records", "7"}, testWriter{t}); err != nil || o.Records != 7 {
		t.Errorf("-records 7 on kfake: %+v, %v", o, err)
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
