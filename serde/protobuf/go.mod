module github.com/antidote-kafka/antidote/serde/protobuf

go 1.26.0

require (
	github.com/antidote-kafka/antidote v0.1.0
	github.com/bufbuild/protocompile v0.14.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/sr v1.8.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kadm v1.20.0 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	github.com/twmb/franz-go/plugin/kslog v1.0.0 // indirect
	golang.org/x/sync v0.8.0 // indirect
)
