package protobuf

import (
	"encoding/binary"
)

// Magic is the first byte of the schema-registry wire format.
const Magic byte = 0

// maxIndexes bounds the message-index array: the nesting depth of the
// message in its file.
const maxIndexes = 64

// ParseWire splits data in the wire format into its schema id, its message
// indexes and its Protobuf payload, which aliases data. The wire format is
// a 0x00 magic byte, the schema id as 4 big-endian bytes, the message
// indexes (the path of the message type in its file: a count, then each
// index, as zigzag varints; a single 0 byte stands for [0], the first
// message), then the Protobuf binary. It returns a [*WireError] (not
// marked: this is a parser) when data does not follow it.
func ParseWire(data []byte) (id int, indexes []int, payload []byte, err error) {
	if len(data) < 6 || data[0] != Magic {
		e := &WireError{Len: len(data), Reason: "shorter than 6 bytes"}
		if len(data) > 0 && data[0] != Magic {
			e.Magic, e.Reason = data[0], "no 0x00 magic byte"
		}
		return 0, nil, nil, e
	}
	id = int(binary.BigEndian.Uint32(data[1:5]))
	rest := data[5:]
	n, k := binary.Varint(rest)
	switch {
	case k <= 0:
		return 0, nil, nil, &WireError{Len: len(data), Reason: "bad message-index count"}
	case n == 0:
		return id, []int{0}, rest[k:], nil
	case n < 0 || n > maxIndexes:
		return 0, nil, nil, &WireError{Len: len(data), Reason: "message-index count out of range"}
	}
	rest = rest[k:]
	indexes = make([]int, n)
	for i := range indexes {
		v, k := binary.Varint(rest)
		if k <= 0 || v < 0 || v > 1<<20 {
			return 0, nil, nil, &WireError{Len: len(data), Reason: "bad message index"}
		}
		indexes[i] = int(v)
		rest = rest[k:]
	}
	return id, indexes, rest, nil
}

// AppendWire appends the wire-format header for schema id and message
// indexes to dst ([0], or none, is written as the single 0 byte).
func AppendWire(dst []byte, id int, indexes ...int) []byte {
	dst = binary.BigEndian.AppendUint32(append(dst, Magic), uint32(id))
	if len(indexes) == 0 || (len(indexes) == 1 && indexes[0] == 0) {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(indexes)))
	for _, i := range indexes {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}
