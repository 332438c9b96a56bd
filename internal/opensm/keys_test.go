package opensm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestGenerateKeys(t *testing.T) {
	seen := map[uint64]bool{}
	for range 100 {
		k, err := GenerateKeys()
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Check(); err != nil {
			t.Fatalf("generated keys fail the check: %v", err)
		}
		for _, key := range []uint64{k.MKey, k.SMKey, k.SAKey} {
			if seen[key] {
				t.Fatalf("key %#x generated twice: not random", key)
			}
			seen[key] = true
		}
	}
}

func TestKeysCheck(t *testing.T) {
	good := Keys{MKey: 0x1111, SMKey: 0x2222, SAKey: 0x3333}
	tests := []struct {
		name string
		keys Keys
		want []string // "" for no error
	}{
		{"good", good, nil},
		{"zero M_Key", Keys{0, 0x2222, 0x3333}, []string{"M_Key is 0, 1"}},
		{"default SM_Key", Keys{0x1111, 1, 0x3333}, []string{"SM_Key is 0, 1"}},
		{"default SA_Key", Keys{0x1111, 0x2222, 1}, []string{"SA_Key is 0, 1"}},
		{"all ones", Keys{^uint64(0), 0x2222, 0x3333}, []string{"M_Key is 0, 1"}},
		{"SA_Key equals SM_Key", Keys{0x1111, 0xabcdef0123, 0xabcdef0123}, []string{"SM_Key and SA_Key are equal"}},
		{"all zero", Keys{}, []string{"M_Key is 0", "SM_Key is 0", "SA_Key is 0", "M_Key and SM_Key are equal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.keys.Check()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "abcdef0123") {
				t.Errorf("error %q shows a key", err)
			}
		})
	}
}

// TestKeysNeverPrint prints and logs a Keys value every way code is likely to,
// and looks for each key in every spelling fmt could give it.
func TestKeysNeverPrint(t *testing.T) {
	k := Keys{MKey: 0x0123456789abcdef, SMKey: 0x1edcba9876543210, SAKey: 0x2aaaaaaaaaaaaaa5}
	var out bytes.Buffer
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X", "%o", "%b", "%016x", "%T %v"} {
		fmt.Fprintf(&out, format+"\n", k)
		fmt.Fprintf(&out, format+"\n", &k)
		fmt.Fprintf(&out, format+"\n", []Keys{k})
		fmt.Fprintf(&out, format+"\n", struct{ K Keys }{k})
	}
	fmt.Fprintln(&out, k, &k, k.String(), k.GoString())
	for _, h := range []slog.Handler{slog.NewJSONHandler(&out, nil), slog.NewTextHandler(&out, nil)} {
		log := slog.New(h)
		log.Info("keys", "keys", k, "pointer", &k)
		log.Info("keys", slog.Any("keys", k), slog.Group("g", "keys", k))
	}
	j, err := json.Marshal(map[string]any{"keys": k})
	if err != nil {
		t.Fatal(err)
	}
	out.Write(j)

	text := strings.ToLower(out.String())
	for _, key := range []uint64{k.MKey, k.SMKey, k.SAKey} {
		for _, spelling := range []string{fmt.Sprintf("%x", key), fmt.Sprintf("%d", key), fmt.Sprintf("%o", key), fmt.Sprintf("%b", key)} {
			if strings.Contains(text, spelling) {
				t.Errorf("key %#x printed as %s in:\n%s", key, spelling, out.String())
			}
		}
	}
	if !strings.Contains(out.String(), "(secret)") {
		t.Errorf("no redacted form printed:\n%s", out.String())
	}
}

func TestFormatKey(t *testing.T) {
	for key, want := range map[uint64]string{
		0x1:                "0x0000000000000001",
		0x0123456789abcdef: "0x0123456789abcdef",
		^uint64(0):         "0xffffffffffffffff",
	} {
		if got := FormatKey(key); got != want {
			t.Errorf("FormatKey(%#x) = %q, want %q", key, got, want)
		}
	}
}
