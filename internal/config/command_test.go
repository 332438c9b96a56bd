package config

import (
	"reflect"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"opensm", []string{"opensm"}},
		{"  /usr/sbin/opensm\t-d0   --guid 0x1 ", []string{"/usr/sbin/opensm", "-d0", "--guid", "0x1"}},
		{`"/opt/open sm/opensm" -d0`, []string{"/opt/open sm/opensm", "-d0"}},
		{`opensm 'a "b" c'`, []string{"opensm", `a "b" c`}},
		{`opensm "it's"`, []string{"opensm", "it's"}},
		{`opensm --name="two words"x`, []string{"opensm", "--name=two wordsx"}},
		{`opensm "" ''`, []string{"opensm", "", ""}},
		{`opensm a\ b`, []string{"opensm", "a b"}},
		{`opensm "a\"b\\c\d"`, []string{"opensm", `a"b\c\d`}},
		{`opensm 'a\b'`, []string{"opensm", `a\b`}},
		{`opensm $HOME ~ * ${X}`, []string{"opensm", "$HOME", "~", "*", "${X}"}},
	}
	for _, tt := range tests {
		got, err := splitCommand(tt.in)
		if err != nil {
			t.Errorf("splitCommand(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitCommand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSplitCommandErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "no executable"},
		{"   ", "no executable"},
		{`"" -d0`, "no executable"},
		{`opensm "a`, "unterminated double quote"},
		{`opensm 'a`, "unterminated single quote"},
		{`opensm a\`, "ends with a backslash that escapes nothing"},
	}
	for _, tt := range tests {
		got, err := splitCommand(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("splitCommand(%q) = %q, %v; want error %q", tt.in, got, err, tt.want)
		}
	}
}
