package storetest

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// fabricTests cover the secrets, expected_switches and enforcement_errors tables.
var fabricTests = []storeTest{
	{"SecretsAreCreatedOnce", testSecretsCreatedOnce},
	{"SecretsAgreeBetweenReplicas", testSecretsReplicas},
	{"SecretErrorsNeverShowValues", testSecretErrors},
	{"SetSecretsReplacesOnlyWhenTold", testSetSecrets},
	{"SetSecretsRacingAFirstStart", testSetSecretsRace},
	{"ConfirmSwitchesReplacesTheSet", testConfirmSwitches},
	{"EnforcementErrorsCountAndClear", testEnforcementErrors},
}

func secretsOf(m map[string]string) func() (map[string]string, error) {
	return func() (map[string]string, error) { return maps.Clone(m), nil }
}

func testSecretsCreatedOnce(t *testing.T, s *store.Store) {
	first := map[string]string{"m_key": "0x1111111111111111", "sm_key": "0x2222222222222222"}
	got, err := s.GetOrCreateSecrets(t.Context(), secretsOf(first))
	if err != nil || !maps.Equal(got, first) {
		t.Fatalf("first GetOrCreateSecrets = %v, %v; want %v", got, err, first)
	}
	// Another set later: the recorded values win, a new name is added.
	later := map[string]string{"m_key": "0x3333333333333333", "sm_key": "0x4444444444444444",
		"sa_key": "0x5555555555555555"}
	got, err = s.GetOrCreateSecrets(t.Context(), secretsOf(later))
	want := maps.Clone(first)
	want["sa_key"] = later["sa_key"]
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("second GetOrCreateSecrets = %v, %v; want %v", got, err, want)
	}
}

// Managers starting together on one database each generate their own keys;
// all of them must end up with the same ones.
func testSecretsReplicas(t *testing.T, s *store.Store) {
	db := NewDatabase(t, s.DB().Name())
	replicas := []*store.Store{OpenDatabase(t, db), OpenDatabase(t, db), OpenDatabase(t, db)}
	results := make([]map[string]string, len(replicas)*2)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			gen := map[string]string{
				"m_key": fmt.Sprintf("0x%016x", i+1), "sm_key": fmt.Sprintf("0x%016x", i+101),
				"sa_key": fmt.Sprintf("0x%016x", i+201)}
			results[i], errs[i] = replicas[i%len(replicas)].GetOrCreateSecrets(t.Context(), secretsOf(gen))
		})
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if len(results[i]) != 3 || !maps.Equal(results[i], results[0]) {
			t.Errorf("caller %d got %v, caller 0 got %v", i, results[i], results[0])
		}
	}
}

func testSecretErrors(t *testing.T, s *store.Store) {
	const hidden = "0xdeadbeefcafe\x01"
	cases := []struct {
		name    string
		gen     func() (map[string]string, error)
		wantErr string
	}{
		{"control character", secretsOf(map[string]string{"m_key": hidden}), "not printable"},
		{"too long", secretsOf(map[string]string{"sm_key": strings.Repeat("k", 256) + "0xdeadbeefcafe"}),
			"want 1 to 255"},
		{"bad name", secretsOf(map[string]string{"M Key": "0x1"}), "secret name"},
		{"generator fails", func() (map[string]string, error) { return nil, errors.New("no entropy") }, "no entropy"},
		{"nothing generated", secretsOf(nil), "no secret generated"},
	}
	for _, tc := range cases {
		_, err := s.GetOrCreateSecrets(t.Context(), tc.gen)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
			continue
		}
		if strings.Contains(err.Error(), "deadbeefcafe") {
			t.Errorf("%s: error shows the value: %v", tc.name, err)
		}
	}
	// A set with one bad value stores none of it.
	_, err := s.GetOrCreateSecrets(t.Context(), secretsOf(map[string]string{"a_key": "0x1", "b_key": hidden}))
	if err == nil {
		t.Fatal("a set with a bad value was accepted")
	}
	got, err := s.GetOrCreateSecrets(t.Context(), secretsOf(map[string]string{"c_key": "0x3"}))
	if want := map[string]string{"c_key": "0x3"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("after refused sets: %v, %v; want only %v", got, err, want)
	}
}

// SetSecrets is the import and the rotation of OpenSM's keys: it inserts
// what is missing, refuses to overwrite without replace (writing nothing),
// and replaces with it.
func testSetSecrets(t *testing.T, s *store.Store) {
	recorded := func() map[string]string {
		t.Helper()
		got, err := s.Secrets(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	imported := map[string]string{"m_key": "0x1111111111111111", "sm_key": "0x2222222222222222"}
	if got, err := s.SetSecrets(t.Context(), imported, false); err != nil || !maps.Equal(got, imported) {
		t.Fatalf("SetSecrets on an empty table = %v, %v; want %v", got, err, imported)
	}
	// The same values again: nothing to replace, no confirmation needed.
	if _, err := s.SetSecrets(t.Context(), imported, false); err != nil {
		t.Fatalf("SetSecrets with the recorded values: %v", err)
	}
	// Another M_Key without replace: refused, naming the key but not its
	// value, and the new name in the same set is not written either.
	other := map[string]string{"m_key": "0xdeadbeefcafe0001", "sm_key": "0x2222222222222222", "sa_key": "0x3333333333333333"}
	_, err := s.SetSecrets(t.Context(), other, false)
	if !errors.Is(err, store.ErrSecretsDiffer) || !strings.Contains(err.Error(), "m_key") ||
		strings.Contains(err.Error(), "sm_key") || strings.Contains(err.Error(), "deadbeefcafe") {
		t.Fatalf("SetSecrets over another M_Key without replace: %v; want ErrSecretsDiffer naming m_key only, no value", err)
	}
	if got := recorded(); !maps.Equal(got, imported) {
		t.Fatalf("a refused SetSecrets wrote: %v, want %v", got, imported)
	}
	// With replace: a rotation.
	if got, err := s.SetSecrets(t.Context(), other, true); err != nil || !maps.Equal(got, other) {
		t.Fatalf("SetSecrets with replace = %v, %v; want %v", got, err, other)
	}
	if got := recorded(); !maps.Equal(got, other) {
		t.Fatalf("after the rotation: %v, want %v", got, other)
	}
	// A bad value in the set: nothing written, no value shown.
	bad := map[string]string{"m_key": "0x4444444444444444", "sa_key": "0xdeadbeefcafe\x01"}
	if _, err := s.SetSecrets(t.Context(), bad, true); err == nil || strings.Contains(err.Error(), "deadbeefcafe") {
		t.Fatalf("SetSecrets with a control character: %v; want an error without the value", err)
	}
	if got := recorded(); !maps.Equal(got, other) {
		t.Fatalf("a refused set wrote: %v, want %v", got, other)
	}
	if _, err := s.SetSecrets(t.Context(), nil, true); err == nil {
		t.Fatal("SetSecrets with no secret succeeded")
	}
}

// An import (without replace) racing managers that start on the same new
// database: either the import wins and every manager uses its keys, or a
// manager's keys win and the import is refused; never a mix.
func testSetSecretsRace(t *testing.T, s *store.Store) {
	db := NewDatabase(t, s.DB().Name())
	replicas := []*store.Store{OpenDatabase(t, db), OpenDatabase(t, db), OpenDatabase(t, db)}
	imported := map[string]string{"m_key": "0x1111111111111111", "sm_key": "0x2222222222222222", "sa_key": "0x3333333333333333"}
	importer := OpenDatabase(t, db)
	var importErr error
	results := make([]map[string]string, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	wg.Go(func() { _, importErr = importer.SetSecrets(t.Context(), imported, false) })
	for i := range replicas {
		wg.Go(func() {
			gen := map[string]string{"m_key": fmt.Sprintf("0x%016x", i+11), "sm_key": fmt.Sprintf("0x%016x", i+111),
				"sa_key": fmt.Sprintf("0x%016x", i+211)}
			results[i], errs[i] = replicas[i].GetOrCreateSecrets(t.Context(), secretsOf(gen))
		})
	}
	wg.Wait()
	final, err := replicas[0].Secrets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case importErr == nil && !maps.Equal(final, imported):
		t.Fatalf("the import succeeded but the table holds %v", final)
	case importErr != nil && !errors.Is(importErr, store.ErrSecretsDiffer):
		t.Fatalf("import: %v, want success or ErrSecretsDiffer", importErr)
	case importErr != nil && maps.Equal(final, imported):
		t.Fatalf("the import was refused (%v) but its keys are recorded", importErr)
	}
	for i := range replicas {
		if errs[i] != nil || !maps.Equal(results[i], final) {
			t.Errorf("manager %d got %v, %v; the table holds %v", i, results[i], errs[i], final)
		}
	}
}

func testConfirmSwitches(t *testing.T, s *store.Store) {
	swA := store.ExpectedSwitch{GUID: 0x0002c90300f00001, Description: "S1 spine; rack 4"}
	swB := store.ExpectedSwitch{GUID: 0x0002c90300f00002, Description: "S2"}
	swC := store.ExpectedSwitch{GUID: 0x0002c90300f00003, Description: "S3 \"leaf\""}
	list := func() []store.ExpectedSwitch {
		t.Helper()
		got, err := s.ExpectedSwitches(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("new database has expected switches %v", got)
	}
	before := time.Now().UTC().Add(-time.Second)
	if err := s.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{swB, swA}); err != nil {
		t.Fatal(err)
	}
	if err := s.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{swC, swB}); err != nil {
		t.Fatal(err)
	}
	got := list()
	if len(got) != 2 || got[0].GUID != swB.GUID || got[1].GUID != swC.GUID ||
		got[0].Description != swB.Description || got[1].Description != swC.Description {
		t.Fatalf("after confirming B, C: %+v", got)
	}
	if at := got[0].ConfirmedAt; at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("ConfirmedAt %v is not now", at)
	}

	bad := []struct {
		name     string
		switches []store.ExpectedSwitch
		wantErr  string
	}{
		{"none", nil, "no switch given"},
		{"twice", []store.ExpectedSwitch{swA, swA}, "given twice"},
		{"zero GUID", []store.ExpectedSwitch{swA, {GUID: 0, Description: "x"}}, "non-zero GUID"},
		{"long description", []store.ExpectedSwitch{{GUID: 9, Description: strings.Repeat("d", 256)}}, "at most 255"},
	}
	for _, tc := range bad {
		if err := s.ConfirmSwitches(t.Context(), tc.switches); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
		}
	}
	if after := list(); len(after) != 2 || after[0].GUID != swB.GUID || after[1].GUID != swC.GUID {
		t.Errorf("refused confirmations changed the set: %+v", after)
	}
}

func testEnforcementErrors(t *testing.T, s *store.Store) {
	sw := fabric.GUID(0x0002c90300f00001).String()
	port3 := store.EnforcementSighting{Switch: sw, Port: 3, Line: "Nov 29 18:16:33 486627 [F89526C0] 0x01 -> first"}
	port3again := store.EnforcementSighting{Switch: sw, Port: 3, Line: "Nov 29 18:16:43 112233 [F89526C0] 0x01 -> again"}
	unattributed := store.EnforcementSighting{Switch: store.Unattributed, Line: "... Clearing Enforcement bit"}
	before := time.Now().UTC().Add(-time.Second)
	old, term := deposedAndLeader(t, s)
	// A deposed leader records nothing.
	if err := s.RecordEnforcementErrors(t.Context(), old, []store.EnforcementSighting{port3}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordEnforcementErrors with an old term = %v; want ErrFenced", err)
	}
	if err := s.RecordEnforcementErrors(t.Context(), term, []store.EnforcementSighting{port3, unattributed}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEnforcementErrors(t.Context(), term, []store.EnforcementSighting{port3again}); err != nil {
		t.Fatal(err)
	}
	got, err := s.EnforcementErrors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("recorded %+v, want 2 switch ports", got)
	}
	// Ordered by switch: GUIDs ("0x...") sort before "unattributed".
	if g := got[0]; g.SwitchPort() != sw+":3" || g.Count != 2 || g.Line != port3again.Line ||
		g.FirstSeen.Before(before) || g.LastSeen.Before(g.FirstSeen) {
		t.Errorf("switch port 3: %+v; want count 2 and the last line", g)
	}
	if g := got[1]; g.SwitchPort() != store.Unattributed || g.Port != 0 || g.Count != 1 || g.Line != unattributed.Line {
		t.Errorf("unattributed: %+v", g)
	}

	bad := []struct {
		name    string
		seen    store.EnforcementSighting
		wantErr string
	}{
		{"upper-case GUID", store.EnforcementSighting{Switch: "0x0002C90300F00001", Port: 1, Line: "l"}, "16 lower-case"},
		{"port 0", store.EnforcementSighting{Switch: sw, Port: 0, Line: "l"}, "port 0: want 1 to 254"},
		{"unattributed with a port", store.EnforcementSighting{Switch: store.Unattributed, Port: 2, Line: "l"}, "want port 0"},
		{"no line", store.EnforcementSighting{Switch: sw, Port: 1}, "no log line"},
	}
	for _, tc := range bad {
		// With a good sighting first: nothing of the batch may be recorded.
		err := s.RecordEnforcementErrors(t.Context(), term, []store.EnforcementSighting{port3, tc.seen})
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
		}
	}
	if after, err := s.EnforcementErrors(t.Context()); err != nil || len(after) != 2 || after[0].Count != 2 {
		t.Errorf("refused batches changed the record: %+v, %v", after, err)
	}

	if n, err := s.ClearEnforcementErrors(t.Context()); err != nil || n != 2 {
		t.Errorf("ClearEnforcementErrors = %d, %v; want 2", n, err)
	}
	if n, err := s.ClearEnforcementErrors(t.Context()); err != nil || n != 0 {
		t.Errorf("second ClearEnforcementErrors = %d, %v; want 0", n, err)
	}
	if after, err := s.EnforcementErrors(t.Context()); err != nil || len(after) != 0 {
		t.Errorf("after clearing: %+v, %v", after, err)
	}
}

// deposedAndLeader begins two terms: old, deposed by term, the leader's.
func deposedAndLeader(t *testing.T, s *store.Store) (old, term int64) {
	t.Helper()
	old, err := s.NewTerm(t.Context(), "deposed")
	if err != nil {
		t.Fatal(err)
	}
	if term, err = s.NewTerm(t.Context(), "leader"); err != nil {
		t.Fatal(err)
	}
	return old, term
}
