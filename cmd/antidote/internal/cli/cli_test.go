package cli

import "testing"

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"a\nb": "a b",
		"unknown command \"dem\" for \"antidote\"\n\nDid you mean this?\n\tdemo\n": `unknown command "dem" for "antidote" (did you mean demo?)`,
		"  spaced   out ": "spaced out",
	} {
		if got := OneLine(errString(in)); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
