// Package sinkpb is the published protocol of antidote run's gRPC sink,
// antidote.sink.v1 (proto/antidote/sink/v1/sink.proto at the repository's
// root): implement SinkServer in a Go service, or generate the stubs of any
// other language from the .proto. The status codes that settle a record
// are in the .proto's comment and in the examples' README.
//
// The Go code is generated, and checked in, with Debian's protoc,
// protoc-gen-go and protoc-gen-go-grpc; from the repository's root:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//	protoc -I proto \
//		--go_out=cmd/antidote/sinkpb --go_opt=module=github.com/antidote-kafka/antidote/cmd/antidote/sinkpb \
//		--go-grpc_out=cmd/antidote/sinkpb --go-grpc_opt=module=github.com/antidote-kafka/antidote/cmd/antidote/sinkpb \
//		antidote/sink/v1/sink.proto
//	protoc -I proto --python_out=cmd/antidote/internal/run/testdata/run/grpc antidote/sink/v1/sink.proto
package sinkpb
