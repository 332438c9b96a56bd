package opensm

import (
	"fmt"
	"strings"
	"testing"
)

func TestReadConfKeys(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	tests := []struct {
		name    string
		conf    string
		want    ConfKeys
		wantErr string
	}{
		{"as UFM writes it", "# UFM\nguid 0x0002c90300a00001\nm_key 0x00000000DEADC0DE\nm_key_protection_level 2\n" +
			"m_key_lookup TRUE\nsm_key 0x0000000000c0ffee\nsa_key\t0x0000000000beef01\n",
			ConfKeys{u(0xdeadc0de), u(0xc0ffee), u(0xbeef01)}, ""},
		{"decimal and blanks", "  sm_key   12648430  \n", ConfKeys{SMKey: u(12648430)}, ""},
		{"none", "guid 0x1\n#m_key 0x5\n", ConfKeys{}, ""},
		{"zero", "m_key 0x0\n", ConfKeys{MKey: u(0)}, ""},
		{"the options OpenSM does not know stay unknown", "M_KEY 0x5\nm_keys 0x6\n", ConfKeys{}, ""},
		{"twice", "m_key 0x5\nsa_key 0x7\nm_key 0x0deadbeefcafe\n", ConfKeys{}, "line 3: m_key is set again (first on line 1)"},
		{"not a number", "sa_key 0xdeadbeefcafeg\n", ConfKeys{}, "line 1: sa_key: want 0x"},
		{"too long", "sm_key 0x10deadbeefcafe0000\n", ConfKeys{}, "line 1: sm_key: want 0x"},
		{"octal", "sm_key 0777deadbeefcafe\n", ConfKeys{}, "sm_key: want 0x"},
		{"no value", "m_key\n", ConfKeys{}, "m_key: want 0x"},
		{"null", "m_key (null)\n", ConfKeys{}, "m_key: want 0x"},
		{"decimal too big", "m_key 98446744073709551616deadbeefcafe\n", ConfKeys{}, "m_key: want 0x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadConfKeys(strings.NewReader(tt.conf))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				if strings.Contains(strings.ToLower(err.Error()), "deadbeefcafe") {
					t.Errorf("error shows the value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				name      string
				got, want *uint64
			}{{"m_key", got.MKey, tt.want.MKey}, {"sm_key", got.SMKey, tt.want.SMKey}, {"sa_key", got.SAKey, tt.want.SAKey}} {
				if (f.got == nil) != (f.want == nil) || (f.got != nil && *f.got != *f.want) {
					t.Errorf("%s = %v, want %v", f.name, deref(f.got), deref(f.want))
				}
			}
		})
	}
}

func deref(p *uint64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%#x", *p)
}

func TestConfKeysNeverPrint(t *testing.T) {
	k := uint64(0xdeadbeefcafe0001)
	c := ConfKeys{MKey: &k, SMKey: &k, SAKey: &k}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
		if out := fmt.Sprintf(format, c); strings.Contains(out, "deadbeefcafe") || strings.Contains(out, fmt.Sprint(k)) {
			t.Errorf("%s prints a key: %s", format, out)
		}
	}
}
