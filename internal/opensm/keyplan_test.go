package opensm

import (
	"strings"
	"testing"
)

// What an import of another manager's opensm.conf records, key by key: the
// file's key where it is in use, else the recorded one, else a new one; a
// well-known key refused where its hardening group needs a real one; other
// recorded keys replaced only when replace says so. No line names a value.
func TestPlanImport(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	ufm := ConfKeys{MKey: u(0x00deadbeef000001), SMKey: u(0x00deadbeef000002), SAKey: u(0x00deadbeef000003)}
	both := Hardening{Groups: []Group{GroupMKey, GroupKeys}}
	recorded := map[string]string{SecretMKey: "0x00000000000d0001", SecretSMKey: "0x00000000000d0002", SecretSAKey: "0x00000000000d0003"}
	for _, tc := range []struct {
		name     string
		recorded map[string]string
		conf     ConfKeys
		h        Hardening
		replace  bool
		want     map[string]string // "" for a new key; absent for an error
		err      string
	}{
		{"every key into a new database", nil, ufm, both, false,
			map[string]string{SecretMKey: "0x00deadbeef000001", SecretSMKey: "0x00deadbeef000002", SecretSAKey: "0x00deadbeef000003"}, ""},
		{"defaults of groups off are not imported", nil, ConfKeys{MKey: u(0), SMKey: u(1), SAKey: u(0x00deadbeef000003)},
			Hardening{}, false, map[string]string{SecretMKey: "", SecretSMKey: "", SecretSAKey: "0x00deadbeef000003"}, ""},
		{"a key the file lacks is kept as recorded", recorded, ConfKeys{MKey: u(0x00000000000d0001)}, both, false, recorded, ""},
		{"a well-known key its group needs is refused", nil, ConfKeys{SMKey: u(1)}, both, false, nil,
			"sm_key in opensm.conf is 0, 1 or all ones"},
		{"other recorded keys need replace", recorded, ufm, both, false, nil,
			"the database holds other keys for m_key, sm_key, sa_key: " + KeysRecordedHint},
		{"replaced when replace says so", recorded, ufm, both, true,
			map[string]string{SecretMKey: "0x00deadbeef000001", SecretSMKey: "0x00deadbeef000002", SecretSAKey: "0x00deadbeef000003"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values, done, err := PlanImport(tc.recorded, tc.conf, tc.h, "opensm.conf", tc.replace)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PlanImport: %v; want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlanImport: %v", err)
			}
			for name, want := range tc.want {
				if got := values[name]; got == "" || (want != "" && got != want) || (want == "" && got == tc.recorded[name]) {
					t.Errorf("%s = %q; want %q (\"\": a new key)", name, got, want)
				}
			}
			if _, err := KeysOf(values); err != nil {
				t.Errorf("the planned keys do not read back: %v", err)
			}
			for _, line := range done {
				for _, v := range values {
					if strings.Contains(line, v) {
						t.Errorf("line %q shows a key", line)
					}
				}
			}
		})
	}
}

// A rotation changes exactly the keys named, each to a new value; names
// are checked before anything is planned, and nothing is rotated before
// keys are recorded.
func TestKeyRotation(t *testing.T) {
	recorded := map[string]string{SecretMKey: "0x00000000000d0001", SecretSMKey: "0x00000000000d0002", SecretSAKey: "0x00000000000d0003"}
	r, err := ParseKeyRotation("m_key, sa_key")
	if err != nil {
		t.Fatal(err)
	}
	values, done, err := r.Plan(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 2 || values[SecretMKey] == recorded[SecretMKey] || values[SecretSAKey] == recorded[SecretSAKey] ||
		values[SecretMKey] == "" || values[SecretSAKey] == "" || len(done) != 2 {
		t.Errorf("rotation of m_key and sa_key = %d values, lines %q; want both new, and only them", len(values), done)
	}
	for _, bad := range []string{"m_key,m_key", "p_key", ""} {
		if _, err := ParseKeyRotation(bad); err == nil {
			t.Errorf("ParseKeyRotation(%q) accepted it", bad)
		}
	}
	if _, _, err := r.Plan(nil); err == nil || !strings.Contains(err.Error(), "no OpenSM keys recorded yet") {
		t.Errorf("rotation without recorded keys: %v", err)
	}
}
