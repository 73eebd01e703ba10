package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// bulkLine is one action and document of a _bulk body, as a server reads it.
type bulkLine struct {
	action, index, id string
	doc               json.RawMessage
}

// parseBulk reads a _bulk body, failing the test on anything but pairs of
// one-line JSON values.
func parseBulk(t *testing.T, body []byte) []bulkLine {
	t.Helper()
	var out []bulkLine
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var meta map[string]struct {
			Index string `json:"_index"`
			ID    string `json:"_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &meta); err != nil || len(meta) != 1 {
			t.Errorf("action line %q: %v", sc.Text(), err)
			return nil
		}
		if !sc.Scan() {
			t.Errorf("an action without its document")
			return nil
		}
		doc := append(json.RawMessage(nil), sc.Bytes()...)
		if !json.Valid(doc) {
			t.Errorf("document line %q is not JSON", doc)
		}
		for a, m := range meta {
			out = append(out, bulkLine{action: a, index: m.Index, id: m.ID, doc: doc})
		}
	}
	if !bytes.HasSuffix(body, []byte("\n")) {
		t.Errorf("the body does not end in a newline")
	}
	return out
}

// fakeBulk is a _bulk endpoint whose answer for each document is chosen by
// the test from the document: item(line) returns the item's status and
// error (type, reason); whole, if set, answers the whole request instead.
type fakeBulk struct {
	t        *testing.T
	item     func(bulkLine) (status int, typ, reason string)
	whole    func() (status int, body string)
	elastic  bool // answer as Elasticsearch does (its product header)
	typed    bool // items carry "_type": "_doc", as Elasticsearch 7 and OpenSearch 1 answer
	mu       sync.Mutex
	requests [][]bulkLine
	headers  []http.Header
}

func (f *fakeBulk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/_bulk" {
		f.t.Errorf("request %s %s, want POST /_bulk", r.Method, r.URL.Path)
	}
	lines := parseBulk(f.t, body)
	f.mu.Lock()
	f.requests = append(f.requests, lines)
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.elastic {
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
	}
	if f.whole != nil {
		st, b := f.whole()
		w.WriteHeader(st)
		_, _ = io.WriteString(w, b)
		return
	}
	items := make([]map[string]any, len(lines))
	errs := false
	for i, l := range lines {
		st, typ, reason := 201, "", ""
		if f.item != nil {
			st, typ, reason = f.item(l)
		}
		it := map[string]any{"_index": l.index, "_id": l.id, "status": st}
		if f.typed {
			it["_type"] = "_doc"
		}
		if typ != "" {
			errs = true
			it["error"] = map[string]any{"type": typ, "reason": reason, "caused_by": map[string]any{"type": "json_parse_exception", "reason": "inner"}}
		} else {
			it["result"] = "created"
			it["_version"] = 1
		}
		items[i] = map[string]any{l.action: it}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"took": 1, "errors": errs, "items": items})
}

func (f *fakeBulk) all() []bulkLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []bulkLine
	for _, r := range f.requests {
		out = append(out, r...)
	}
	return out
}

func newFakeSearch(t *testing.T, f *fakeBulk, c runSearch) *searchSink {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c.URLs = []string{srv.URL}
	if c.Index == "" {
		c.Index = "events-{topic}"
	}
	s, err := newSearchSink("opensearch", &c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// dialects are the answers of the servers the sink speaks to, where they
// differ: OpenSearch 2, Elasticsearch 8 (its product header), and
// Elasticsearch 7 (the header, and a _type in every item).
var dialects = []struct {
	name           string
	elastic, typed bool
}{{"opensearch", false, false}, {"elasticsearch8", true, false}, {"elasticsearch7", true, true}}

// docRecords are n records of topic Orders, partition 2, from offset 10,
// each a JSON document {"n":i} keyed k<i>.
func docRecords(n int) []*consumer.Record[[]byte, []byte] {
	out := make([]*consumer.Record[[]byte, []byte], n)
	for i := range out {
		raw := &kgo.Record{Topic: "Orders", Partition: 2, Offset: int64(10 + i), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)}
		out[i] = &consumer.Record[[]byte, []byte]{Raw: raw, Key: raw.Key, Value: raw.Value}
	}
	return out
}

// TestSearchSinkItems: each record is settled from its own bulk item: 201,
// 200 and 409 processed; 429 and 5xx transient; 400 (mapping, strict,
// illegal argument) and other 4xx permanent, the error holding the item's
// status, type and reason; the cluster's own faults transient.
func TestSearchSinkItems(t *testing.T) {
	answers := map[string]struct {
		status       int
		typ, reason  string
		class        failure.Class // 0: processed
		wantInReason string
	}{
		`{"n":0}`:  {201, "", "", 0, ""},
		`{"n":1}`:  {200, "", "", 0, ""},
		`{"n":2}`:  {409, "version_conflict_engine_exception", "document already exists", 0, ""},
		`{"n":3}`:  {400, "mapper_parsing_exception", "failed to parse field [n]", failure.ClassPermanent, "400 mapper_parsing_exception: failed to parse field [n]"},
		`{"n":4}`:  {400, "strict_dynamic_mapping_exception", "mapping set to strict", failure.ClassPermanent, "strict_dynamic_mapping_exception: mapping set to strict"},
		`{"n":5}`:  {400, "illegal_argument_exception", "bad value", failure.ClassPermanent, "illegal_argument_exception"},
		`{"n":6}`:  {429, "es_rejected_execution_exception", "rejected execution", failure.ClassTransient, "429 es_rejected_execution_exception"},
		`{"n":7}`:  {503, "unavailable_shards_exception", "primary shard is not active", failure.ClassTransient, "503"},
		`{"n":8}`:  {500, "exception", "boom", failure.ClassTransient, "500"},
		`{"n":9}`:  {404, "index_not_found_exception", "no such index", failure.ClassTransient, "index_not_found_exception"},
		`{"n":10}`: {403, "cluster_block_exception", "index read-only / allow delete (api)", failure.ClassTransient, "cluster_block_exception"},
		`{"n":11}`: {413, "illegal_argument_exception", "document too large", failure.ClassPermanent, "413"},
	}
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			f := &fakeBulk{elastic: d.elastic, typed: d.typed, item: func(l bulkLine) (int, string, string) {
				a := answers[string(l.doc)]
				return a.status, a.typ, a.reason
			}}
			s := newFakeSearch(t, f, runSearch{})
			batch := docRecords(len(answers))
			err := s.handleBatch(context.Background(), batch)
			var be *consumer.BatchError
			if !errors.As(err, &be) {
				t.Fatalf("handleBatch: %v, want a *consumer.BatchError", err)
			}
			if n := len(f.requests); n != 1 {
				t.Fatalf("%d requests, want one _bulk for the batch", n)
			}
			for i, r := range batch {
				a := answers[string(r.Value)]
				got := be.Errs[i]
				if a.class == 0 {
					if got != nil {
						t.Errorf("%s (status %d): %v, want processed", r.Value, a.status, got)
					}
					continue
				}
				if got == nil {
					t.Errorf("%s (status %d): processed, want %v", r.Value, a.status, a.class)
					continue
				}
				if c := failure.Classify(got); c != a.class {
					t.Errorf("%s (status %d): class %v, want %v (%v)", r.Value, a.status, c, a.class, got)
				}
				if !strings.Contains(got.Error(), a.wantInReason) || !strings.Contains(got.Error(), "events-orders/Orders-2-") {
					t.Errorf("%s: error %q, want it to hold %q and the index/id", r.Value, got, a.wantInReason)
				}
			}
			if !strings.Contains(be.Errs[3].Error(), "caused by json_parse_exception: inner") {
				t.Errorf("the cause is missing: %v", be.Errs[3])
			}
		})
	}
}

// TestSearchSinkBody: the body is what a server reads: one action line and
// one document line a record (a pretty-printed document compacted), the
// index from the template (topic lower-cased), deterministic ids from
// topic-partition-offset or from the key, the chosen action; a record that
// is not a document is refused before the request, alone.
func TestSearchSinkBody(t *testing.T) {
	f := &fakeBulk{}
	s := newFakeSearch(t, f, runSearch{Index: "logs-{topic}-v1"})
	batch := docRecords(3)
	batch[1].Value = []byte("{\n  \"n\": 1,\n  \"s\": \"a\\nb\"\n}\n")
	batch[2].Value = []byte("{\n bad")
	err := s.handleBatch(context.Background(), batch)
	var be *consumer.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 1 || be.Errs[2] == nil || failure.Classify(be.Errs[2]) != failure.ClassPermanent {
		t.Fatalf("handleBatch: %v, want record 2 alone permanent", err)
	}
	lines := f.all()
	if len(lines) != 2 {
		t.Fatalf("%d documents sent, want 2", len(lines))
	}
	for i, l := range lines {
		wantID := fmt.Sprintf("Orders-2-%d", 10+i)
		if l.action != "index" || l.index != "logs-orders-v1" || l.id != wantID {
			t.Errorf("document %d: %s %s/%s, want index logs-orders-v1/%s", i, l.action, l.index, l.id, wantID)
		}
	}
	if string(lines[1].doc) != `{"n":1,"s":"a\nb"}` {
		t.Errorf("pretty document sent as %s", lines[1].doc)
	}
	if ct := f.headers[0].Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q", ct)
	}

	// Ids from the key, action create; a record without a key (or with a
	// key that is no id) is refused alone.
	f2 := &fakeBulk{}
	s2 := newFakeSearch(t, f2, runSearch{ID: "key", Action: "create"})
	batch = docRecords(4)
	batch[1].Raw.Key, batch[1].Key = nil, nil
	batch[2].Raw.Key = []byte{0xff, 0xfe}
	batch[2].Key = batch[2].Raw.Key
	batch[3].Raw.Key = []byte("k\"3\\\n é")
	batch[3].Key = batch[3].Raw.Key
	err = s2.handleBatch(context.Background(), batch)
	if !errors.As(err, &be) || len(be.Errs) != 2 || be.Errs[1] == nil || be.Errs[2] == nil {
		t.Fatalf("handleBatch: %v, want records 1 and 2 refused", err)
	}
	lines = f2.all()
	if len(lines) != 2 || lines[0].id != "k0" || lines[1].id != "k\"3\\\n é" || lines[0].action != "create" {
		t.Errorf("sent %+v, want create k0 and the escaped key of record 3", lines)
	}
}

// TestSearchSinkBytes: a batch larger than batch.bytes goes in several
// requests, each under the limit (a record larger than it alone), in
// offset order, every record once.
func TestSearchSinkBytes(t *testing.T) {
	f := &fakeBulk{}
	s := newFakeSearch(t, f, runSearch{Batch: runBulkBatch{Bytes: 1024}})
	batch := docRecords(40)
	big := fmt.Appendf(nil, `{"s":"%s"}`, strings.Repeat("x", 3000))
	batch[20].Value = big
	if err := s.handleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(f.requests) < 3 {
		t.Fatalf("%d requests, want the batch split", len(f.requests))
	}
	next := 10
	for _, r := range f.requests {
		size := 0
		for _, l := range r {
			if l.id != fmt.Sprintf("Orders-2-%d", next) {
				t.Fatalf("document %s, want Orders-2-%d", l.id, next)
			}
			next++
			size += len(l.doc)
		}
		if len(r) > 1 && size > 1024 {
			t.Errorf("a request of %d records carries %d bytes of documents, over the limit", len(r), size)
		}
	}
	if next != 50 {
		t.Errorf("%d documents sent, want 40", next-10)
	}
}

// TestSearchSinkWholeRequest: a request that fails as a whole is transient
// (no answer, 429, 5xx, 401), except a body refused as malformed or too
// large (400, 413), which is permanent so that each record is tried alone.
func TestSearchSinkWholeRequest(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		class  failure.Class
		want   string
	}{
		{429, `{"error":{"type":"es_rejected_execution_exception","reason":"queue full"},"status":429}`, failure.ClassTransient, "es_rejected_execution_exception: queue full"},
		{503, `{"error":{"type":"cluster_block_exception","reason":"state not recovered"},"status":503}`, failure.ClassTransient, "503"},
		{502, `bad gateway`, failure.ClassTransient, "502"},
		{401, `{"error":{"type":"security_exception","reason":"missing authentication credentials"},"status":401}`, failure.ClassTransient, "security_exception"},
		{413, ``, failure.ClassPermanent, "413"},
		{400, `{"error":{"type":"illegal_argument_exception","reason":"The bulk request must be terminated by a newline"},"status":400}`, failure.ClassPermanent, "illegal_argument_exception"},
		{200, `{"took":1,"errors":false,"items":[]}`, failure.ClassTransient, "200"},
	} {
		for _, d := range dialects {
			t.Run(fmt.Sprint(tc.status, "/", d.name), func(t *testing.T) {
				f := &fakeBulk{elastic: d.elastic, typed: d.typed, whole: func() (int, string) { return tc.status, tc.body }}
				s := newFakeSearch(t, f, runSearch{})
				err := s.handleBatch(context.Background(), docRecords(3))
				var be *consumer.BatchError
				if err == nil || errors.As(err, &be) {
					t.Fatalf("handleBatch: %v, want the batch failed as a whole", err)
				}
				if c := failure.Classify(err); c != tc.class {
					t.Errorf("class %v, want %v (%v)", c, tc.class, err)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q, want it to hold %q", err, tc.want)
				}
			})
		}
	}
	t.Run("no answer", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		s, err := newSearchSink("opensearch", &runSearch{URLs: []string{url}, Index: "x"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		err = s.handleBatch(context.Background(), docRecords(2))
		if failure.Classify(err) != failure.ClassTransient {
			t.Errorf("connection refused: %v (class %v), want transient", err, failure.Classify(err))
		}
	})
}

// TestSearchSinkAuth: basic auth and API keys reach the server, and an
// Elasticsearch 8 answer (its product header) is read like OpenSearch's.
func TestSearchSinkAuth(t *testing.T) {
	f := &fakeBulk{elastic: true}
	s := newFakeSearch(t, f, runSearch{Username: "u", Password: "p"})
	if err := s.handleBatch(context.Background(), docRecords(1)); err != nil {
		t.Fatal(err)
	}
	if u, p, ok := (&http.Request{Header: f.headers[0]}).BasicAuth(); !ok || u != "u" || p != "p" {
		t.Errorf("basic auth %q %q %v", u, p, ok)
	}
	f2 := &fakeBulk{elastic: true}
	s2 := newFakeSearch(t, f2, runSearch{APIKey: "c2VjcmV0"})
	if err := s2.handle(context.Background(), docRecords(1)[0]); err != nil {
		t.Fatal(err)
	}
	if a := f2.headers[0].Get("Authorization"); a != "ApiKey c2VjcmV0" {
		t.Errorf("Authorization %q", a)
	}
}

// TestSearchSinkConfig: the sink's keys are checked with the file's line,
// and --check prints the resolved sink without its secrets.
func TestSearchSinkConfig(t *testing.T) {
	const base = `kafka:
  brokers: [127.0.0.1:9092]
pipelines:
  - name: search
    topics: [orders]
    group: search
    value:
      format: json
    sink:
      opensearch:
        urls: [http://127.0.0.1:9200]
        index: events-{topic}
`
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"typo", strings.Replace(base, "        index:", "        indx: x\n        index:", 1), "f.yaml:12: pipelines[0].sink.opensearch.indx: unknown key (did you mean index?)"},
		{"no urls", strings.Replace(base, "        urls: [http://127.0.0.1:9200]\n", "", 1), "pipelines[0].sink.opensearch.urls: required"},
		{"bad url", strings.Replace(base, "http://127.0.0.1:9200", "127.0.0.1:9200", 1), "f.yaml:11: pipelines[0].sink.opensearch.urls[0]:"},
		{"no index", strings.Replace(base, "        index: events-{topic}\n", "", 1), "pipelines[0].sink.opensearch.index: required"},
		{"upper index", strings.Replace(base, "events-{topic}", "Events-{topic}", 1), `f.yaml:12: pipelines[0].sink.opensearch.index: "Events-topic": index names are lower case`},
		{"placeholder", strings.Replace(base, "events-{topic}", "events-{partition}", 1), "f.yaml:12: pipelines[0].sink.opensearch.index: \"events-{partition}\": the only placeholder is {topic}"},
		{"id", base + "        id: keys\n", `f.yaml:13: pipelines[0].sink.opensearch.id: "keys" is not one of topic-partition-offset, key (did you mean key?)`},
		{"action", base + "        action: upsert\n", `pipelines[0].sink.opensearch.action: "upsert" is not one of index, create`},
		{"half login", base + "        username: u\n", "pipelines[0].sink.opensearch.username: username and password go together"},
		{"two logins", base + "        username: u\n        password: p\n        api-key: k\n", "pipelines[0].sink.opensearch.api-key: one way to log in"},
		{"tls on http", base + "        tls: {ca-file: ca.pem}\n", "pipelines[0].sink.opensearch.tls: pipelines[0].sink.opensearch.urls[0] is http://"},
		{"batch bytes", base + "        batch: {bytes: 10}\n", "f.yaml:13: pipelines[0].sink.opensearch.batch.bytes: 10: at least 1024"},
		{"batch key", base + "        batch: {lingr: 1s}\n", "pipelines[0].sink.opensearch.batch.lingr: unknown key (did you mean linger?)"},
		{"string format", strings.Replace(base, "format: json", "format: string", 1), "f.yaml:8: pipelines[0].value.format: string: the opensearch sink indexes JSON documents"},
		{"two sinks", base + "      kafka: {topic: x}\n", "pipelines[0].sink.opensearch: one sink per pipeline: kafka or opensearch"},
		{"elasticsearch", strings.Replace(base, "opensearch:", "elasticsearch:", 1) + "        timeout: -1s\n", "pipelines[0].sink.elasticsearch.timeout: negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
	file := clitest.WriteFile(t, "search.yaml", base+"        api-key: s3cr3t\n        batch: {size: 1000, linger: 200ms}\n")
	code, out, errOut := runCmd(t, "run", "--check", "-c", file)
	if code != 0 {
		t.Fatalf("--check: exit %d: %s", code, errOut)
	}
	want := "opensearch _bulk index into index events-{topic} at http://127.0.0.1:9200 (ids from topic-partition-offset; batches of at most 1000 records or 5242880 bytes, linger 200ms; timeout 30s; API key (not shown))"
	if !strings.Contains(out, want) || strings.Contains(out, "s3cr3t") {
		t.Errorf("--check printed:\n%s\nwant the line %q and no secret", out, want)
	}
}

// TestSearchSinkTLS: with tls.ca-file, the sink trusts a node whose
// certificate that CA signed, and refuses one it did not (a transient
// failure: the partition waits rather than dead-letter).
func TestSearchSinkTLS(t *testing.T) {
	f := &fakeBulk{t: t}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caFile := clitest.WriteFile(t, "ca.pem", string(ca))
	s, err := newSearchSink("opensearch", &runSearch{URLs: []string{srv.URL}, Index: "x", TLS: &cli.TLSConfig{CAFile: caFile}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	if err := s.handleBatch(context.Background(), docRecords(2)); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if n := len(f.all()); n != 2 {
		t.Errorf("%d documents, want 2", n)
	}
	plain, err := newSearchSink("opensearch", &runSearch{URLs: []string{srv.URL}, Index: "x"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.close)
	err = plain.handleBatch(context.Background(), docRecords(1))
	if err == nil || failure.Classify(err) != failure.ClassTransient {
		t.Errorf("without the CA: %v, want a transient failure", err)
	}
}
