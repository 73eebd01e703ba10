package run

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// envOpenSearch names a real OpenSearch node (scripts/opensearch.sh start
// prints one); the tests that index into it skip without it.
const envOpenSearch = "ANTIDOTE_OPENSEARCH_URL"

// openSearch returns the URL of the real node, or skips t.
func openSearch(t *testing.T) string {
	t.Helper()
	u := strings.TrimRight(strings.TrimSpace(os.Getenv(envOpenSearch)), "/")
	if u == "" {
		t.Skip("no OpenSearch: set " + envOpenSearch + " (scripts/opensearch.sh start prints one)")
	}
	return u
}

// osDo sends one request to the node and returns the status and body.
func osDo(t *testing.T, base, method, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// createIndex creates index with mapping (a JSON object) and one shard
// without replicas, and deletes it at the end of the test.
func createIndex(t *testing.T, base, index, mapping string) {
	t.Helper()
	osDo(t, base, http.MethodDelete, "/"+index, "")
	st, b := osDo(t, base, http.MethodPut, "/"+index, `{"settings":{"number_of_shards":1,"number_of_replicas":0},"mappings":`+mapping+`}`)
	if st != http.StatusOK {
		t.Fatalf("create index %s: %d %s", index, st, b)
	}
	t.Cleanup(func() { osDo(t, base, http.MethodDelete, "/"+index, "") })
}

// docIDs refreshes index and returns the id of each of its documents with
// how many times it was seen (every count is 1 in a sound index: the map
// also shows the total) and the total the index reports.
func docIDs(t *testing.T, base, index string) (map[string]int, int) {
	t.Helper()
	if st, b := osDo(t, base, http.MethodPost, "/"+index+"/_refresh", ""); st != http.StatusOK {
		t.Fatalf("refresh %s: %d %s", index, st, b)
	}
	st, b := osDo(t, base, http.MethodPost, "/"+index+"/_search", `{"size":10000,"_source":false,"track_total_hits":true,"query":{"match_all":{}}}`)
	if st != http.StatusOK {
		t.Fatalf("search %s: %d %s", index, st, b)
	}
	var r struct {
		Hits struct {
			Total struct {
				Value int `json:"value"`
			} `json:"total"`
			Hits []struct {
				ID string `json:"_id"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&r); err != nil {
		t.Fatalf("search %s: %v", index, err)
	}
	ids := map[string]int{}
	for _, h := range r.Hits.Hits {
		ids[h.ID]++
	}
	return ids, r.Hits.Total.Value
}

// docCount is the number of documents of index after a refresh (0 when it
// does not exist yet).
func docCount(t *testing.T, base, index string) int {
	t.Helper()
	osDo(t, base, http.MethodPost, "/"+index+"/_refresh", "")
	st, b := osDo(t, base, http.MethodGet, "/"+index+"/_count", "")
	if st != http.StatusOK {
		return 0
	}
	var r struct {
		Count int `json:"count"`
	}
	_ = json.Unmarshal(b, &r)
	return r.Count
}
