package demo

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
)

// TestDemoAdmin: demo --admin serves the admin API and /metrics during the
// run and, with --keep, after it; the printed commands work.
func TestDemoAdmin(t *testing.T) {
	t.Setenv(admin.EnvToken, "demo-admin-token")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	o := shortOptions()
	o.admin, o.keep = addr, true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out clitest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, &out, io.Discard, cli.Globals{Brokers: []string{cli.DefaultBrokers}, Output: "table", Timeout: 10 * time.Second}, o)
	}()
	waitOut := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), what); {
			select {
			case err := <-done:
				t.Fatalf("demo ended before printing %q: %v\n%s", what, err, out.String())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q after 60s:\n%s", what, out.String())
			}
		}
	}
	base := "http://" + addr
	waitOut("admin API and /metrics at " + base + " (token demo-admin-token)")

	// During the run: scrape until the consumer has consumed something (or
	// the run is over).
	var sawClient bool
	for scrapes := 0; ; scrapes++ {
		fams := clitest.ScrapeMetrics(t, base, "demo-admin-token")
		if scrapes == 0 {
			for _, name := range []string{"antidote_ready", "antidote_retry_enabled", "antidote_records_consumed_total"} {
				if fams[name] == nil {
					t.Errorf("/metrics during the run lacks %s", name)
				}
			}
		}
		sawClient = sawClient || fams["antidote_kafka_read_bytes_total"] != nil
		if clitest.FamilySum(fams, "antidote_records_consumed_total", "", "") > 0 && sawClient || strings.Contains(out.String(), "stays up at") {
			t.Logf("%d scrapes during the run; franz-go client metrics seen: %v", scrapes+1, sawClient)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	// After it (--keep): every consumed record is settled, and the
	// counters say so.
	waitOut("The admin API remains available")
	waitOut("stays up at")
	fams := clitest.ScrapeMetrics(t, base, "demo-admin-token")
	consumed := clitest.FamilySum(fams, "antidote_records_consumed_total", "", "")
	processed := clitest.FamilySum(fams, "antidote_records_total", "outcome", "processed")
	dead := clitest.FamilySum(fams, "antidote_records_total", "outcome", "dead-lettered")
	skipped := clitest.FamilySum(fams, "antidote_records_total", "outcome", "skipped")
	if consumed < float64(o.records) || processed == 0 || dead == 0 || processed+dead+skipped != consumed {
		t.Errorf("after the demo: consumed %v, processed %v, dead-lettered %v, skipped %v; want every one of %d records settled",
			consumed, processed, dead, skipped, o.records)
	}
	if v := clitest.FamilySum(fams, "antidote_retries_total", "", ""); v == 0 {
		t.Error("antidote_retries_total is 0 after an outage")
	}

	// The printed commands work when pasted.
	ctlRe := regexp.MustCompile(`antidote ctl --admin (\S+) --token (\S+) status`)
	m := ctlRe.FindStringSubmatch(out.String())
	if m == nil || m[1] != base {
		t.Fatalf("no ctl command for %s in:\n%s", base, out.String())
	}
	t.Setenv(admin.EnvToken, "")
	ctlStatus := func() string {
		code, stdout, stderr := runCmd(t, "ctl", "--admin", m[1], "--token", m[2], "status")
		if code != cli.ExitOK {
			t.Fatalf("pasted ctl command: exit %d\n%s%s", code, stdout, stderr)
		}
		return stdout
	}
	// A consumer of the demo's group stays up: ctl acts on it. A record
	// of key stuck, produced as the printed command does, makes it stuck;
	// ctl skips it, and pauses and resumes a partition.
	clitest.WaitFor(t, 60*time.Second, "the consumer that stays up to be ready", func() bool { return strings.Contains(ctlStatus(), "consumer demo: READY") }, out.String)
	poisonRe := regexp.MustCompile(`poison --brokers (\S+) --topic (\S+) --kind empty --key stuck`)
	pm := poisonRe.FindStringSubmatch(out.String())
	if pm == nil {
		t.Fatalf("no poison command for a stuck record in:\n%s", out.String())
	}
	if code, stdout, stderr := runCmd(t, "poison", "--brokers", pm[1], "--topic", pm[2], "--kind", "empty", "--key", "stuck", "--partition", "0"); code != cli.ExitOK {
		t.Fatalf("poison: exit %d\n%s%s", code, stdout, stderr)
	}
	stuckRe := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(pm[2]) + `\s+0\s+stuck\s.*offset (\d+), retrying`)
	var offset string
	clitest.WaitFor(t, 60*time.Second, "partition 0 stuck on the record of key stuck", func() bool {
		if sm := stuckRe.FindStringSubmatch(ctlStatus()); sm != nil {
			offset = sm[1]
		}
		return offset != ""
	}, out.String)
	for _, args := range [][]string{{"skip", pm[2], "0", offset}, {"pause", pm[2], "0"}, {"resume", pm[2], "0"}} {
		if code, stdout, stderr := runCmd(t, append([]string{"ctl", "--admin", m[1], "--token", m[2]}, args...)...); code != cli.ExitOK {
			t.Errorf("ctl %v on the consumer that stays up: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	clitest.WaitFor(t, 60*time.Second, "partition 0 to flow after the skip", func() bool { return !stuckRe.MatchString(ctlStatus()) }, out.String)
	curlRe := regexp.MustCompile(`curl -s -H 'Authorization: Bearer (\S+)' (\S+)/metrics`)
	if m := curlRe.FindStringSubmatch(out.String()); m == nil || m[1] != "demo-admin-token" || m[2] != base {
		t.Errorf("no curl command for %s in:\n%s", base, out.String())
	}

	// The web console, under /ui/ of the admin API, lists the demo's
	// dead-letter topic with its letters.
	if !strings.Contains(out.String(), "web console: "+base+"/ui/") {
		t.Errorf("no console address in:\n%s", out.String())
	}
	req, _ := http.NewRequest("GET", base+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer demo-admin-token")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), ".dlq</a>") || !strings.Contains(string(page), `href="/ui/consumers/demo"`) {
		t.Errorf("GET /ui/ = %d:\n%s", resp.StatusCode, page)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo --admin --keep ended with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop after Ctrl-C")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the admin API still answers after the demo ended")
	}
}

func TestDemoAdminBadAddress(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	for addr, want := range map[string]string{
		"0.0.0.0:9180":  "loopback address only",
		"192.0.2.1:80":  "loopback address only",
		"127.0.0.1":     "want HOST:PORT",
		"nonsense:port": "loopback address only",
	} {
		code, _, stderr := runCmd(t, "demo", "--admin", addr)
		clitest.CheckOneLineError(t, code, cli.ExitUsage, stderr, want)
	}
}
