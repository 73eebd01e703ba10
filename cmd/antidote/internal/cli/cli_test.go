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

func TestCheckEnum(t *testing.T) {
	values := []string{"permanent", "transient", "unclassified"}
	for _, ok := range []string{"", "permanent", "TRANSIENT"} {
		if err := CheckEnum("class", ok, values); err != nil {
			t.Errorf("CheckEnum(%q) = %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"perm":      `--class "perm": want one of permanent, transient, unclassified (did you mean permanent?)`,
		"transiant": `--class "transiant": want one of permanent, transient, unclassified (did you mean transient?)`,
		"fatal":     `--class "fatal": want one of permanent, transient, unclassified`,
	} {
		err := CheckEnum("class", in, values)
		if err == nil || err.Error() != want || !IsUsage(err) {
			t.Errorf("CheckEnum(%q) = %v, want the usage error %q", in, err, want)
		}
	}
}
