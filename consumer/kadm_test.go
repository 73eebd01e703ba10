package consumer_test

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type endsResult struct {
	ends map[int32]int64
	err  error
}

func kadmEnds(ctx context.Context, cl *kgo.Client, topic string) endsResult {
	adm := kadm.NewClient(cl)
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return endsResult{err: err}
	}
	out := map[int32]int64{}
	var ferr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
		}
		out[o.Partition] = o.Offset
	})
	return endsResult{ends: out, err: ferr}
}

func kadmCommitted(ctx context.Context, cl *kgo.Client, group, topic string) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range os[topic] {
		out[p] = o.At
	}
	return out, nil
}
