// Package testpb holds the generated test types of serde/protobuf:
// acme/order.proto (acme.Order with a nested acme.Order.Item, and
// acme.Refund), which imports acme/money.proto and a well-known type. The
// Go code and the Python modules (python/, for the foreign producer) are
// generated, and checked in, with Debian's protoc and protoc-gen-go; from
// this folder:
//
//	go build -o /tmp/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
//	protoc --plugin=protoc-gen-go=/tmp/protoc-gen-go -I . --go_out=. \
//		--go_opt=module=github.com/antidote-kafka/antidote/serde/protobuf/internal/testpb \
//		acme/money.proto acme/order.proto
//	protoc -I . --python_out=python acme/money.proto acme/order.proto
package testpb
