package sinkpb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/antidote-kafka/antidote/cmd/antidote/sinkpb"
)

// TestGeneratedMatchesProto: the checked-in stubs, Go and Python, were
// generated from the published .proto as it is: its descriptor, compiled
// here, equals the one each of them embeds (comments aside).
func TestGeneratedMatchesProto(t *testing.T) {
	root := filepath.Join("..", "..", "..", "proto")
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}})}
	files, err := c.Compile(context.Background(), "antidote/sink/v1/sink.proto")
	if err != nil {
		t.Fatal(err)
	}
	want := protodesc.ToFileDescriptorProto(files[0])
	want.SourceCodeInfo = nil

	goDesc := protodesc.ToFileDescriptorProto(sinkpb.File_antidote_sink_v1_sink_proto)
	goDesc.SourceCodeInfo = nil
	if !proto.Equal(goDesc, want) {
		t.Errorf("sink.pb.go was not generated from proto/antidote/sink/v1/sink.proto as it is: generate it again (see the package doc)")
	}

	py, err := os.ReadFile(filepath.Join("..", "internal", "run", "testdata", "run", "grpc", "antidote", "sink", "v1", "sink_pb2.py"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`AddSerializedFile\(b'((?:[^'\\]|\\.)*)'\)`).FindSubmatch(py)
	if m == nil {
		t.Fatal("sink_pb2.py: no serialized descriptor")
	}
	raw, err := pythonBytes(string(m[1]))
	if err != nil {
		t.Fatalf("sink_pb2.py: %v", err)
	}
	pyDesc := new(descriptorpb.FileDescriptorProto)
	if err := proto.Unmarshal(raw, pyDesc); err != nil {
		t.Fatalf("sink_pb2.py: %v", err)
	}
	// protoc's Python output leaves out the fields' JSON names.
	want = proto.Clone(want).(*descriptorpb.FileDescriptorProto)
	noJSONNames(want.MessageType)
	if !proto.Equal(pyDesc, want) {
		t.Errorf("sink_pb2.py was not generated from proto/antidote/sink/v1/sink.proto as it is: generate it again (see the package doc)")
	}
}

func noJSONNames(ms []*descriptorpb.DescriptorProto) {
	for _, m := range ms {
		for _, f := range m.Field {
			f.JsonName = nil
		}
		noJSONNames(m.NestedType)
	}
}

// pythonBytes decodes the body of a Python bytes literal as protoc writes
// it: printable ASCII, and \xhh, \n, \r, \t, \\, \' and \" escapes.
func pythonBytes(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		if i+1 >= len(s) {
			return nil, fmt.Errorf("a trailing backslash")
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case '\\', '\'', '"':
			out = append(out, s[i])
		case 'x':
			if i+2 >= len(s) {
				return nil, fmt.Errorf("a short \\x escape")
			}
			b, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, err
			}
			out = append(out, byte(b))
			i += 2
		default:
			return nil, fmt.Errorf("escape \\%c", s[i])
		}
	}
	return out, nil
}
