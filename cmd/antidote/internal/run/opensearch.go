package run

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/errmask"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// The search-engine sink writes the records of a pipeline to OpenSearch or
// Elasticsearch with the _bulk API: the records of a partition are batched
// (by count, by bytes and by linger), and each record is settled from its
// own item of the bulk response:
//
//	200, 201                                processed
//	409 (the document exists)               processed: a redelivery of a record already written
//	429, 5xx                                transient (es_rejected_execution_exception, unavailable shards)
//	403 cluster_block_exception,            transient: the cluster's fault, not the record's
//	404 index_not_found_exception           (a read-only index, auto-creation off); the partition waits
//	any other status (400 mapper_parsing_   permanent: dead-lettered, the letter's message holding
//	exception, strict_dynamic_mapping_      the item's status, error type and reason
//	exception, illegal_argument_exception)
//
// A request that fails as a whole (no answer, a timeout, 429, 5xx, 401,
// 403) is transient: the batch is retried under the policy, and since
// document ids are deterministic a retried batch overwrites what it wrote
// before instead of duplicating it. A whole request rejected as malformed
// (400) or too large (413) is permanent: the consumer tries each record
// alone, so that only the record at fault is dead-lettered.
//
// The client is opensearch-go (v4): it speaks the _bulk dialect of
// OpenSearch and of Elasticsearch 7 and 8, which are the same for what this
// sink sends and reads, and it does not refuse a server by its product
// name, as go-elasticsearch does with anything that is not Elasticsearch.

// Defaults of the search-engine sink.
const (
	defaultBulkSize    = 500
	defaultBulkBytes   = 5 << 20
	defaultBulkLinger  = 50 * time.Millisecond
	defaultBulkTimeout = 30 * time.Second
	// maxDocID is the longest document id OpenSearch and Elasticsearch take, in bytes.
	maxDocID = 512
)

// Document ids and bulk actions of the file.
var (
	bulkIDs     = []string{"topic-partition-offset", "key"}
	bulkActions = []string{"index", "create"}
)

// runSearch is the opensearch (or elasticsearch) sink of the file.
type runSearch struct {
	URLs     []string       `yaml:"urls"`
	Index    string         `yaml:"index"`
	ID       string         `yaml:"id"`     // topic-partition-offset (default), key
	Action   string         `yaml:"action"` // index (default), create
	Username string         `yaml:"username"`
	Password string         `yaml:"password"`
	APIKey   string         `yaml:"api-key"`
	TLS      *cli.TLSConfig `yaml:"tls"`
	Timeout  time.Duration  `yaml:"timeout"`
	Batch    runBulkBatch   `yaml:"batch"`
}

// runBulkBatch sizes the bulk requests.
type runBulkBatch struct {
	Size   int           `yaml:"size"`
	Bytes  int64         `yaml:"bytes"`
	Linger time.Duration `yaml:"linger"`
}

// searchSink is the search-engine sink of one pipeline.
type searchSink struct {
	kind    string // opensearch or elasticsearch, for messages
	api     *opensearchapi.Client
	urls    []string
	index   indexTemplate
	byKey   bool
	action  string
	timeout time.Duration
	maxSize int
	bytes   int
	linger  time.Duration
	indexes sync.Map // topic → index name
}

// indexTemplate is the name of a record's index: {topic} is replaced by
// the record's topic in lower case (index names are lower case).
type indexTemplate string

func (t indexTemplate) name(topic string) string {
	return strings.ReplaceAll(string(t), "{topic}", strings.ToLower(topic))
}

// checkIndexName checks an index name as OpenSearch does.
func checkIndexName(s string) error {
	switch {
	case s == "":
		return errors.New("empty index name")
	case s == "." || s == "..":
		return fmt.Errorf("%q is not an index name", s)
	case len(s) > 255:
		return errors.New("an index name has at most 255 bytes")
	case strings.ToLower(s) != s:
		return fmt.Errorf("%q: index names are lower case", s)
	case strings.ContainsAny(s[:1], "-_+"):
		return fmt.Errorf("%q: an index name cannot start with '-', '_' or '+'", s)
	case strings.ContainsAny(s, "\\/*?\"<>| ,#:"):
		return fmt.Errorf("%q: an index name cannot hold any of \\ / * ? \" < > | , # : or a space", s)
	}
	return nil
}

// newSearchSink builds the sink of c; kind is the file's key, opensearch or
// elasticsearch.
func newSearchSink(kind string, c *runSearch) (*searchSink, error) {
	s := &searchSink{
		kind:    kind,
		urls:    c.URLs,
		index:   indexTemplate(c.Index),
		byKey:   c.ID == "key",
		action:  cmp.Or(c.Action, "index"),
		timeout: cmpDur(c.Timeout, defaultBulkTimeout),
		maxSize: int(cmpInt(int64(c.Batch.Size), defaultBulkSize)),
		bytes:   int(cmpInt(c.Batch.Bytes, defaultBulkBytes)),
		linger:  cmpDur(c.Batch.Linger, defaultBulkLinger),
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: min(s.timeout, 10*time.Second), KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   min(s.timeout, 10*time.Second),
		ResponseHeaderTimeout: s.timeout,
	}
	if c.TLS != nil {
		cfg, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	hdr := http.Header{}
	if c.APIKey != "" {
		hdr.Set("Authorization", "ApiKey "+c.APIKey)
	}
	discover := false
	api, err := opensearchapi.NewClient(opensearchapi.Config{
		Client: opensearch.Config{
			Addresses: c.URLs,
			Username:  c.Username,
			Password:  c.Password,
			Header:    hdr,
			Transport: tr,
			// The policy retries: a failed request is the record's
			// transient failure, retried with the pipeline's backoff
			// while the partition waits.
			DisableRetry:         true,
			DiscoverNodesOnStart: &discover,
		},
		// Items that failed are read from the response, not returned as
		// an error.
		Errors: errmask.New(errmask.All),
	})
	if err != nil {
		return nil, err
	}
	s.api = api
	return s, nil
}

func (s *searchSink) describe() string {
	id := "topic-partition-offset"
	if s.byKey {
		id = "the record's key"
	}
	return fmt.Sprintf("%s _bulk %s into index %s (ids from %s; batches of at most %d records or %d bytes, linger %v, timeout %v)",
		s.kind, s.action, s.index, id, s.maxSize, s.bytes, s.linger, s.timeout)
}

func (s *searchSink) close() {
	if t, ok := s.api.Client.Transport.(interface{ Close() error }); ok {
		_ = t.Close()
	}
}

// batching is the consumer's batching for this sink: bytes are the sink's
// own split (a batch larger than them goes in several requests).
func (s *searchSink) batching() consumer.Batching {
	return consumer.Batching{Size: s.maxSize, Linger: s.linger}
}

// handle writes one record: a bulk of one.
func (s *searchSink) handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error {
	return oneOfBatch(s.handleBatch(ctx, []*consumer.Record[[]byte, []byte]{r}))
}

// bulkError is a record that the search engine refused: the status and the
// error of its bulk item.
type bulkError struct {
	Index, ID string
	Status    int
	Type      string
	Reason    string
	Cause     string // "type: reason" of the cause, if any
}

func (e *bulkError) Error() string {
	s := fmt.Sprintf("bulk item %s/%s: %d %s: %s", e.Index, e.ID, e.Status, e.Type, e.Reason)
	if e.Cause != "" {
		s += " (caused by " + e.Cause + ")"
	}
	return s
}

// classify marks the failure of a bulk item.
func (e *bulkError) classify() error {
	switch {
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return failure.Transient(e)
	case e.Status == http.StatusNotFound && e.Type == "index_not_found_exception",
		e.Status == http.StatusForbidden && strings.Contains(e.Type, "cluster_block_exception"):
		return failure.Transient(e)
	}
	return failure.Permanent(e)
}

// requestError is a bulk request that failed as a whole.
type requestError struct {
	kind   string
	Status int // 0: no answer
	Err    error
}

func (e *requestError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s _bulk: %v", e.kind, e.Err)
	}
	return fmt.Sprintf("%s _bulk: status %d: %v", e.kind, e.Status, e.Err)
}

func (e *requestError) Unwrap() error { return e.Err }

// entry is a record in a bulk request.
type entry struct {
	i int // index in the batch
	r *consumer.Record[[]byte, []byte]
}

// id is the document id of the entry's record (for messages: the body has it).
func (s *searchSink) id(r *consumer.Record[[]byte, []byte]) string {
	if s.byKey {
		return string(r.Key)
	}
	return r.Raw.Topic + "-" + strconv.Itoa(int(r.Raw.Partition)) + "-" + strconv.FormatInt(r.Raw.Offset, 10)
}

// handleBatch writes a batch of records of one partition: one _bulk request,
// or several when the body would exceed the byte limit.
func (s *searchSink) handleBatch(ctx context.Context, batch []*consumer.Record[[]byte, []byte]) error {
	errs := map[int]error{}
	// A body is never reused: the HTTP transport may still read a request's
	// body after the answer came (a server that answers early).
	size := 0
	for _, r := range batch {
		size += len(r.Value) + 100
	}
	body := make([]byte, 0, min(size, s.bytes+4096))
	chunk := make([]entry, 0, len(batch))
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := s.bulk(ctx, body, chunk, errs)
		chunk, body = chunk[:0], make([]byte, 0, cap(body))
		return err
	}
	for i, r := range batch {
		start := len(body)
		var err error
		body, err = s.appendEntry(body, r)
		if err != nil {
			body = body[:start]
			errs[i] = err
			continue
		}
		if len(chunk) > 0 && len(body) > s.bytes {
			// This record goes in the next request.
			line := append([]byte(nil), body[start:]...)
			body = body[:start]
			if err := flush(); err != nil {
				return err
			}
			body = append(body, line...)
		}
		chunk = append(chunk, entry{i: i, r: r})
	}
	if err := flush(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &consumer.BatchError{Errs: errs}
	}
	return nil
}

// appendEntry appends the bulk lines of r, the action and the document, to
// body; an error is the record's, and body is then to be cut back.
func (s *searchSink) appendEntry(body []byte, r *consumer.Record[[]byte, []byte]) ([]byte, error) {
	raw := r.Raw
	body = append(body, `{"`...)
	body = append(body, s.action...)
	body = append(body, `":{"_index":`...)
	body = appendJSONString(body, s.indexOf(raw.Topic))
	body = append(body, `,"_id":`...)
	if s.byKey {
		switch {
		case r.Key == nil:
			return body, failure.Permanent(errors.New("document id from the key: the record has no key"))
		case !utf8.Valid(r.Key):
			return body, failure.Permanent(errors.New("document id from the key: the key is not UTF-8 text"))
		case len(r.Key) == 0 || len(r.Key) > maxDocID:
			return body, failure.Permanent(fmt.Errorf("document id from the key: the key has %d bytes (an id has 1 to %d)", len(r.Key), maxDocID))
		}
		body = appendJSONString(body, string(r.Key))
	} else {
		body = appendJSONString(body, raw.Topic)
		body = append(body[:len(body)-1], '-') // the closing quote comes after the offset
		body = strconv.AppendInt(body, int64(raw.Partition), 10)
		body = append(body, '-')
		body = strconv.AppendInt(body, raw.Offset, 10)
		body = append(body, '"')
	}
	body = append(body, "}}\n"...)
	doc := bytes.TrimSpace(r.Value)
	if len(doc) == 0 {
		return body, failure.Permanent(errors.New("the value is empty: not a JSON document"))
	}
	if bytes.IndexByte(doc, '\n') >= 0 || bytes.IndexByte(doc, '\r') >= 0 {
		// One line per document: a pretty-printed JSON value is compacted
		// (and one that is not JSON is refused here).
		var b bytes.Buffer
		if err := json.Compact(&b, doc); err != nil {
			return body, failure.Permanent(fmt.Errorf("the value is not a JSON document: %w", err))
		}
		doc = b.Bytes()
	}
	body = append(body, doc...)
	return append(body, '\n'), nil
}

// indexOf is the index of topic's records.
func (s *searchSink) indexOf(topic string) string {
	if v, ok := s.indexes.Load(topic); ok {
		return v.(string)
	}
	name := s.index.name(topic)
	s.indexes.Store(topic, name)
	return name
}

// appendJSONString appends v as a JSON string.
func appendJSONString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(v)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

// bulk sends body, the lines of chunk, in one request and records each
// item's failure in errs; an error is the request's, failing the whole
// batch.
func (s *searchSink) bulk(ctx context.Context, body []byte, chunk []entry, errs map[int]error) error {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.api.Bulk(rctx, opensearchapi.BulkReq{
		Body:   bytes.NewReader(body),
		Header: http.Header{"Content-Type": {"application/x-ndjson"}},
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	status := 0
	if resp != nil {
		if r := resp.Inspect().Response; r != nil {
			status = r.StatusCode
		}
	}
	if status/100 != 2 || len(resp.Items) == 0 {
		// Without items the request failed as a whole. (With them, an
		// error is the client's report of failed items, read below.)
		return s.requestFailed(status, err)
	}
	if len(resp.Items) != len(chunk) {
		return failure.Transient(&requestError{kind: s.kind, Status: status, Err: fmt.Errorf("%d items in the response to %d documents", len(resp.Items), len(chunk))})
	}
	for k, item := range resp.Items {
		e := chunk[k]
		var it opensearchapi.BulkRespItem
		for _, v := range item { // one action per item
			it = v
		}
		if it.Status/100 == 2 || it.Status == http.StatusConflict {
			continue
		}
		be := &bulkError{Index: s.indexOf(e.r.Raw.Topic), ID: s.id(e.r), Status: it.Status}
		if it.Error != nil {
			be.Type, be.Reason = it.Error.Type, it.Error.Reason
			if c := it.Error.Cause; c.Type != "" {
				be.Cause = c.Type + ": " + c.Reason
			}
		}
		errs[e.i] = be.classify()
	}
	return nil
}

func (s *searchSink) requestFailed(status int, err error) error {
	if err == nil {
		err = errors.New(http.StatusText(status))
	}
	var se *opensearch.StructError
	if errors.As(err, &se) {
		err = fmt.Errorf("%s: %s", se.Err.Type, se.Err.Reason)
	}
	re := &requestError{kind: s.kind, Status: status, Err: err}
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		// The body is refused: each record is tried alone, which finds
		// the one at fault.
		return failure.Permanent(re)
	}
	return failure.Transient(re)
}

// setKeys are the sink keys of the file that are set, in the file's order.
func (s *runSink) setKeys() []string {
	var keys []string
	for _, k := range []struct {
		name string
		set  bool
	}{{"http", s.HTTP != nil}, {"kafka", s.Kafka != nil}, {"opensearch", s.OpenSearch != nil}, {"elasticsearch", s.Elasticsearch != nil}, {"grpc", s.GRPC != nil}} {
		if k.set {
			keys = append(keys, k.name)
		}
	}
	return keys
}

// search returns the search-engine sink of the file and its key.
func (s *runSink) search() (*runSearch, string) {
	if s.Elasticsearch != nil {
		return s.Elasticsearch, "elasticsearch"
	}
	return s.OpenSearch, "opensearch"
}

// validateSearchSink checks the opensearch (or elasticsearch) sink.
func (p *runPlan) validateSearchSink(pp *pipelinePlan) error {
	d := p.doc
	c, kind := pp.cfg.Sink.search()
	at := pp.path + ".sink." + kind
	switch f := pp.cfg.Value.Format; f {
	case "json", "json-schema", "avro", "protobuf":
	default:
		return d.errAt(pp.path+".value.format", "%s: the %s sink indexes JSON documents: use json, json-schema, avro or protobuf", f, kind)
	}
	if len(c.URLs) == 0 {
		return d.errAt(at+".urls", "required: the nodes, for example [https://127.0.0.1:9200]")
	}
	for i, u := range c.URLs {
		k := fmt.Sprintf("%s.urls[%d]", at, i)
		if err := checkURL(u); err != nil {
			return d.errAt(k, "%v", err)
		}
		if c.TLS != nil && strings.HasPrefix(strings.TrimSpace(u), "http://") {
			return d.errAt(at+".tls", "%s is http://: TLS needs https://", k)
		}
	}
	if c.Index == "" {
		return d.errAt(at+".index", "required: the index, with {topic} for one per topic, for example events-{topic}")
	}
	rest := strings.ReplaceAll(c.Index, "{topic}", "topic")
	if i := strings.IndexAny(rest, "{}"); i >= 0 {
		return d.errAt(at+".index", "%q: the only placeholder is {topic}", cli.Safe(c.Index))
	}
	if err := checkIndexName(rest); err != nil {
		return d.errAt(at+".index", "%v", err)
	}
	if c.ID != "" {
		if err := d.choice(at+".id", c.ID, bulkIDs...); err != nil {
			return err
		}
	}
	if c.Action != "" {
		if err := d.choice(at+".action", c.Action, bulkActions...); err != nil {
			return err
		}
	}
	if (c.Username == "") != (c.Password == "") {
		return d.errAt(at+".username", "username and password go together")
	}
	if c.APIKey != "" && c.Username != "" {
		return d.errAt(at+".api-key", "one way to log in: api-key or username and password, not both")
	}
	if c.Timeout < 0 {
		return d.errAt(at+".timeout", "negative")
	}
	return validateBatch(d, at+".batch", &c.Batch, defaultBulkBytes)
}

// describeSearch is what --check prints about the search-engine sink.
func describeSearch(s runSink) string {
	c, kind := s.search()
	urls := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		urls[i] = redactURL(u)
	}
	auth := "no login"
	switch {
	case c.APIKey != "":
		auth = "API key (not shown)"
	case c.Username != "":
		auth = "user " + cli.Safe(c.Username) + " (password not shown)"
	}
	return fmt.Sprintf("%s _bulk %s into index %s at %s (ids from %s; batches of at most %d records or %d bytes, linger %v; timeout %v; %s)",
		kind, cmp.Or(c.Action, "index"), c.Index, strings.Join(urls, ", "), cmp.Or(c.ID, "topic-partition-offset"),
		cmpInt(int64(c.Batch.Size), defaultBulkSize), cmpInt(c.Batch.Bytes, defaultBulkBytes), cmpDur(c.Batch.Linger, defaultBulkLinger),
		cmpDur(c.Timeout, defaultBulkTimeout), auth)
}
