package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With -sink opensearch, both programs index the topic into OpenSearch
// through a proxy of this process, which counts the documents of each
// _bulk request as it passes: the rate of a run is its documents over the
// time from the first request to the last answer. The bare program is a
// bulk loader on the same client as antidote run's sink (opensearch-go):
// poll, one _bulk request of up to 500 records a partition at a time (the
// partitions in parallel), the same ids (topic-partition-offset) and
// index action, commit after each poll. Each run writes a fresh index.

// bulkProxy forwards to OpenSearch and counts the documents it is sent.
type bulkProxy struct {
	rp  *httputil.ReverseProxy
	srv *server
}

func newBulkProxy(target string, srv *server) (*bulkProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	return &bulkProxy{rp: rp, srv: srv}, nil
}

func (p *bulkProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	docs := 0
	if strings.HasSuffix(r.URL.Path, "/_bulk") {
		docs = bytes.Count(body, []byte("\n")) / 2
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	start := time.Now()
	p.rp.ServeHTTP(w, r)
	if docs > 0 {
		p.srv.add(docs, start)
	}
}

// searchIndex creates (fresh) the index of a run: one shard, no replica.
func searchIndex(base, index string) error {
	for _, m := range []string{http.MethodDelete, http.MethodPut} {
		req, _ := http.NewRequest(m, base+"/"+index, strings.NewReader(`{"settings":{"number_of_shards":1,"number_of_replicas":0}}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if m == http.MethodPut && resp.StatusCode != http.StatusOK {
			return fmt.Errorf("create index %s: %s", index, resp.Status)
		}
	}
	return nil
}

// dropIndex deletes the index of a run.
func dropIndex(base, index string) {
	req, _ := http.NewRequest(http.MethodDelete, base+"/"+index, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

// runBareBulk is the bare bulk loader.
func runBareBulk(brokers []string, topic, group, target, index string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll())
	if err != nil {
		return err
	}
	defer cl.Close()
	discover := false
	api, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{
		Addresses: []string{target}, DisableRetry: true, DiscoverNodesOnStart: &discover,
		Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
	}})
	if err != nil {
		return err
	}
	const batch = 500
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			cl.AllowRebalance()
			break
		}
		var wg sync.WaitGroup
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var body []byte
				for i := 0; i < len(p.Records); i += batch {
					body = body[:0]
					for _, r := range p.Records[i:min(i+batch, len(p.Records))] {
						body = append(body, `{"index":{"_index":"`...)
						body = append(body, index...)
						body = append(body, `","_id":"`...)
						body = append(body, r.Topic...)
						body = append(body, '-')
						body = strconv.AppendInt(body, int64(r.Partition), 10)
						body = append(body, '-')
						body = strconv.AppendInt(body, r.Offset, 10)
						body = append(body, "\"}}\n"...)
						body = append(body, r.Value...)
						body = append(body, '\n')
					}
					for {
						resp, err := api.Bulk(ctx, opensearchapi.BulkReq{Body: bytes.NewReader(body),
							Header: http.Header{"Content-Type": {"application/x-ndjson"}}})
						if err == nil && !resp.Errors {
							break
						}
						if ctx.Err() != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}
			}()
		})
		wg.Wait()
		cl.MarkCommitRecords(fs.Records()...)
		cl.AllowRebalance()
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.CommitMarkedOffsets(cctx)
}
