package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// TestRunValueChains: each format and stage of the file decodes what it
// should to the bytes a sink sends, and fails the rest permanently, named
// by the stage that failed.
func TestRunValueChains(t *testing.T) {
	dir := t.TempDir()
	key := []byte("0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(filepath.Join(dir, "k.bin"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	aes := serde.AESGCM(serde.StaticKeys{"k1": key}, serde.EncryptWith("k1"))
	zstd := serde.Zstd()
	encode := func(b []byte) ([]byte, []serde.Header) {
		m := serde.Meta{Topic: "t", Part: serde.Value}
		z, err := zstd.Encode(ctx, &m, b)
		if err != nil {
			t.Fatal(err)
		}
		e, err := aes.Encode(ctx, &m, z)
		if err != nil {
			t.Fatal(err)
		}
		return e, m.Headers
	}
	for _, tc := range []struct {
		name, value string
		in          func() ([]byte, []serde.Header)
		want        string // "" : a permanent failure
		stage       string
	}{
		{"json", "{format: json}", func() ([]byte, []serde.Header) { return []byte(` {"a": 1} `), nil }, `{"a": 1}`, ""},
		{"json bad", "{format: json}", func() ([]byte, []serde.Header) { return []byte(`{"a": `), nil }, "", "json"},
		{"string", "{format: string}", func() ([]byte, []serde.Header) { return []byte("héllo"), nil }, "héllo", ""},
		{"string bad", "{format: string}", func() ([]byte, []serde.Header) { return []byte{0xff, 'a'}, nil }, "", "string"},
		{"bytes", "{format: bytes}", func() ([]byte, []serde.Header) { return []byte{0, 0xff}, nil }, "\x00\xff", ""},
		{"aes zstd json", "{format: json, stages: [{type: aes-gcm, keys: {k1: k.bin}}, {type: zstd}]}", func() ([]byte, []serde.Header) { return encode([]byte(`[1,2]`)) }, `[1,2]`, ""},
		{"aes wrong key id", "{format: json, stages: [{type: aes-gcm, keys: {k2: k.bin}}, {type: zstd}]}", func() ([]byte, []serde.Header) { return encode([]byte(`[1,2]`)) }, "", "aes-gcm"},
		{"zstd garbage", "{format: bytes, stages: [{type: zstd}]}", func() ([]byte, []serde.Header) { return []byte("not zstd"), nil }, "", "zstd"},
		{"gzip too large", "{format: bytes, stages: [{type: gzip, max-size: 10}]}", func() ([]byte, []serde.Header) {
			return gzipOf(t, []byte(strings.Repeat("a", 100))), nil
		}, "", "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(pipelineYAML, "    value:\n      format: json\n", "    value: "+tc.value+"\n", 1)
			p, err := parseRunFile(filepath.Join(dir, "run.yaml"), []byte(y), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, _, err := p.pipelines[0].valueDeserializer(nil)
			if err != nil {
				t.Fatal(err)
			}
			in, hs := tc.in()
			got, err := d.Deserialize(ctx, serde.Meta{Topic: "orders", Part: serde.Value, Headers: hs}, in)
			if tc.want != "" {
				if err != nil || string(got) != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("decoded %q, want a failure", got)
			}
			if c, _ := failure.MarkOf(err); c != failure.ClassPermanent {
				t.Fatalf("class %v: %v", c, err)
			}
			if s, _ := serde.StageOf(err); s != tc.stage {
				t.Fatalf("stage %q, want %q: %v", s, tc.stage, err)
			}
		})
	}
}

// TestClassifyProduce: a forward that no retry can fix is permanent; a
// missing topic or a denied ACL waits (transient), so that a wrong target
// never empties the source into the dead-letter topic.
func TestClassifyProduce(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want failure.Class
	}{
		{kerr.MessageTooLarge, failure.ClassPermanent},
		{kerr.InvalidRecord, failure.ClassPermanent},
		{kerr.TopicAuthorizationFailed, failure.ClassTransient},
		{kerr.UnknownTopicOrPartition, failure.ClassTransient},
		{kerr.NotLeaderForPartition, failure.ClassTransient},
		{kerr.RequestTimedOut, failure.ClassTransient},
		{errors.New("something else"), failure.ClassUnclassified},
	} {
		err := classifyProduce("clean", tc.err)
		c, _ := failure.MarkOf(err)
		if c != tc.want || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "forward to clean") {
			t.Errorf("%v: class %v, want %v (%v)", tc.err, c, tc.want, err)
		}
	}
}
