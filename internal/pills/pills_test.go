package pills

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

func TestKinds(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		if k.Name == "" || k.Help == "" || seen[k.Name] {
			t.Errorf("kind %q: no name, no help, or a name used twice", k.Name)
		}
		seen[k.Name] = true
		if f, ok := Find(k.Name); !ok || f.Name != k.Name {
			t.Errorf("Find(%q) = %q, %v", k.Name, f.Name, ok)
		}
		for i := range 6 {
			a, b := k.Value(i, 300), k.Value(i, 300)
			if !bytes.Equal(a, b) {
				t.Errorf("%s: pill %d differs between two calls", k.Name, i)
			}
			if a == nil {
				t.Errorf("%s: pill %d is a null value", k.Name, i)
			}
		}
	}
	if len(Names()) != len(seen) || len(seen) != 12 {
		t.Errorf("%d names, %d kinds: want the 12 kinds of antidote poison", len(Names()), len(seen))
	}
	if _, ok := Find("nope"); ok {
		t.Error("Find found an unknown kind")
	}
	// Kinds is a copy: a caller cannot change the list.
	ks := Kinds()
	ks[0].Name = "changed"
	if Kinds()[0].Name != "garbage" {
		t.Error("Kinds returns the list itself")
	}
}

func TestShapes(t *testing.T) {
	k, _ := Find("huge")
	if v := k.Value(0, 5000); len(v) != 5000 || !json.Valid(v) {
		t.Errorf("huge: %d bytes, valid JSON %v", len(v), json.Valid(v))
	}
	k, _ = Find("unknown-schema")
	if v := k.Value(0, 0); v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != UnknownSchemaID || !bytes.Equal(v[5:], AvroBody) {
		t.Errorf("unknown-schema %x", v)
	}
	if got := ConfluentFrame(1, []byte("x")); !bytes.Equal(got, []byte{0, 0, 0, 0, 1, 'x'}) {
		t.Errorf("ConfluentFrame(1, x) = %x", got)
	}
}
