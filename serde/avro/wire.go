package avro

import "encoding/binary"

// Magic is the first byte of the schema-registry wire format.
const Magic byte = 0

// headerLen is the length of the wire-format header: magic byte + schema id.
const headerLen = 5

// ParseWire splits data in the wire format into its schema id and its Avro
// payload, which aliases data. It returns a [*WireError] (not marked: this
// is a parser) when data is shorter than 5 bytes or does not start with
// [Magic].
func ParseWire(data []byte) (id int, payload []byte, err error) {
	if len(data) < headerLen || data[0] != Magic {
		e := &WireError{Len: len(data)}
		if len(data) > 0 {
			e.Magic = data[0]
		}
		return 0, nil, e
	}
	return int(binary.BigEndian.Uint32(data[1:headerLen])), data[headerLen:], nil
}

// AppendWire appends the wire-format header for schema id to dst.
func AppendWire(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, Magic), uint32(id))
}
