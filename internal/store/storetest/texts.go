package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The texts the store writes, bounded on every engine (store/texts.go): a text
// longer than its column holds (MariaDB's text: 64 KiB) is cut, never
// refused, so that no write fails for good.
var textTests = []storeTest{
	{"LongErrorsAndDetailsAreBoundedNotRefused", testLongTexts},
	{"TextAtItsBoundIsKeptWhole", testTextAtBound},
	{"KubernetesJobOfManyGUIDs", testKubernetesJobOfManyGUIDs},
	{"LongNamesAndHostsAreBounded", testLongNames},
}

// pkeyErrors is n pkey error lines as a sweep's errors are joined into a
// job's error, with characters of every UTF-8 length, an invalid byte and a
// NUL in node descriptions a tenant chose: about 110 bytes a line.
func pkeyErrors(n int) string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x%04x because Pkey table is "+
			"full for node 0x0002c903%08x port 1 (hôst-€-𝄞-%d\xff\x00)", 0x8000|i, i, i)
	}
	return "OpenSM applied the partitions file with errors: " + strings.Join(lines, "; ")
}

// checkBounded fails the test unless got is what the store makes of want
// under a bound of limit bytes: want whole when it fits, else a start of it
// (its invalid bytes and NULs replaced) with a note of what was cut.
func checkBounded(t *testing.T, what, got, want string, limit int) {
	t.Helper()
	clean := strings.ToValidUTF8(strings.ReplaceAll(want, "\x00", "\uFFFD"), "\uFFFD")
	clean = strings.ReplaceAll(clean, "\x00", "\uFFFD")
	switch {
	case len(got) > limit || !utf8.ValidString(got) || strings.Contains(got, "\x00"):
		t.Errorf("%s: %d bytes, valid UTF-8 %t: want at most %d bytes of UTF-8 without NUL",
			what, len(got), utf8.ValidString(got), limit)
	case len(clean) <= limit && got != clean:
		t.Errorf("%s: %q, want it whole", what, got)
	case len(clean) > limit:
		i := strings.LastIndex(got, "… (")
		if i < 0 || !strings.HasPrefix(clean, got[:i]) || i < limit/2 ||
			got[i:] != fmt.Sprintf("… (%d more bytes: see the manager's log)", len(clean)-i) {
			t.Errorf("%s: %d bytes ending %q: want the text's start and a note of what was cut",
				what, len(got), got[max(0, len(got)-120):])
		}
	}
}

// testLongTexts: a sweep's 2,000 pkey error lines (200 KiB) fail jobs, are an
// apply's detail, tell waiting jobs why, and are an enforcement error's line:
// every write succeeds and reads back bounded.
func testLongTexts(t *testing.T, s *store.Store) {
	ctx := t.Context()
	long := pkeyErrors(2000)
	if len(long) < 200<<10 {
		t.Fatalf("the test's text is %d bytes: want over 200 KiB", len(long))
	}
	j1 := addNetwork(t, s, netA, 101)
	j2 := addNetwork(t, s, netB, 102)
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}

	// A waiting job says why, on the second line of its description.
	if n, err := s.DescribeOpenJobs(ctx, term, j2.Revision, long); err != nil || n != 2 {
		t.Fatalf("DescribeOpenJobs(200 KiB) = %d, %v; want 2 jobs", n, err)
	}
	j := job(t, s, j2.ID)
	first, reason, _ := strings.Cut(j.Description, "\n")
	if first != j2.Description || strings.Contains(reason, "\n") {
		t.Errorf("description %q...: want %q, then one line", j.Description[:80], j2.Description)
	}
	checkBounded(t, "waiting reason", reason, strings.Join(strings.Fields(long), " "), 4000)

	if n, err := s.FailJob(ctx, term, j1.ID, long); err != nil || n != 1 {
		t.Fatalf("FailJob(200 KiB) = %d, %v; want 1", n, err)
	}
	checkBounded(t, "FailJob's error", job(t, s, j1.ID).Error, long, store.MaxJobText)
	if n, err := s.FailJobs(ctx, term, j2.Revision, long); err != nil || n != 1 {
		t.Fatalf("FailJobs(200 KiB) = %d, %v; want 1", n, err)
	}
	j = job(t, s, j2.ID)
	checkBounded(t, "FailJobs' error", j.Error, long, store.MaxJobText)
	if j.Description != j2.Description {
		t.Errorf("failed job's description %q, want %q", j.Description, j2.Description)
	}

	now := time.Now().UTC()
	a := store.Apply{Revision: j2.Revision, SHA256: "ab", Term: term, Outcome: "applied", Detail: long,
		StartedAt: now.Add(-time.Second), FinishedAt: now}
	if ok, err := s.RecordApply(ctx, a); err != nil || !ok {
		t.Fatalf("RecordApply(200 KiB) = %t, %v; want recorded", ok, err)
	}
	checkBounded(t, "RecordApply's detail", lastApply(t, s).Detail, long, store.MaxJobText)
	a.Detail = "SUBNET UP, with pkey errors: " + long
	if f, err := s.FinishApply(ctx, a, func(store.GateState) bool { return true }); err != nil || !f.Recorded {
		t.Fatalf("FinishApply(200 KiB) = %+v, %v; want recorded", f, err)
	}
	checkBounded(t, "FinishApply's detail", lastApply(t, s).Detail, a.Detail, store.MaxJobText)

	line := "0x01 -> Clearing Enforcement bit of node: " + long
	if err := s.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{
		{Switch: store.Unattributed, Line: line}}); err != nil {
		t.Fatalf("RecordEnforcementErrors(200 KiB) = %v", err)
	}
	errs, err := s.EnforcementErrors(ctx)
	if err != nil || len(errs) != 1 {
		t.Fatalf("EnforcementErrors = %+v, %v; want 1", errs, err)
	}
	checkBounded(t, "enforcement line", errs[0].Line, line, store.MaxEnforcementLine)
}

// testTextAtBound: a text of exactly its bound, in 4-byte characters, is kept
// whole (MariaDB counts bytes in a text); one byte more is cut.
func testTextAtBound(t *testing.T, s *store.Store) {
	ctx := t.Context()
	j1 := addNetwork(t, s, netA, 101)
	j2 := addNetwork(t, s, netB, 102)
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	exact := strings.Repeat("𝄞", store.MaxJobText/4)
	if n, err := s.FailJob(ctx, term, j1.ID, exact); err != nil || n != 1 {
		t.Fatalf("FailJob(%d bytes) = %d, %v", len(exact), n, err)
	}
	if got := job(t, s, j1.ID).Error; got != exact {
		t.Errorf("error of exactly %d bytes read back as %d bytes", len(exact), len(got))
	}
	over := exact + "a"
	if n, err := s.FailJob(ctx, term, j2.ID, over); err != nil || n != 1 {
		t.Fatalf("FailJob(%d bytes) = %d, %v", len(over), n, err)
	}
	checkBounded(t, "error one byte over", job(t, s, j2.ID).Error, over, store.MaxJobText)
}

// testKubernetesJobOfManyGUIDs: ib-kubernetes adds 5,000 GUIDs in one
// request: the change is recorded, and its job's texts are bounded.
func testKubernetesJobOfManyGUIDs(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	members := make([]store.KubernetesMember, 5000)
	guids := make([]string, len(members))
	for i := range members {
		members[i] = store.KubernetesMember{GUID: fabric.GUID(0x0a00000000000001 + uint64(i)), Membership: fabric.Full}
		guids[i] = fmt.Sprintf("%016x", uint64(members[i].GUID))
	}
	body, err := json.Marshal(map[string]any{"pkey": "0x1005", "guids": guids, "membership": "full"})
	if err != nil {
		t.Fatal(err)
	}
	add := kubeAdd(0x1005, members...)
	add.Request = string(body)
	j, err := s.AddKubernetesGUIDs(ctx, add)
	if err != nil {
		t.Fatalf("AddKubernetesGUIDs(5,000 GUIDs): %v", err)
	}
	got := job(t, s, j.ID)
	if got.Description != j.Description || got.Result != j.Result || got.Request != string(body) {
		t.Errorf("job %d as recorded differs from the job returned: description %d/%d bytes, result %d/%d, request %d/%d",
			j.ID, len(got.Description), len(j.Description), len(got.Result), len(j.Result), len(got.Request), len(body))
	}
	checkSummary(t, "addition's description", got.Description, "Add GUIDs 0a00000000000001 (full), ", 5000)
	checkSummary(t, "addition's result", got.Result, "GUIDs 0a00000000000001 (full), ", 5000)
	k, err := s.GetKubernetesPKey(ctx, 0x1005)
	if err != nil || len(k.Members) != len(members) {
		t.Errorf("pkey 0x1005 has %d members, %v; want %d", len(k.Members), err, len(members))
	}
	// Their removal, with one GUID more that is no member.
	gone := make([]fabric.GUID, 0, len(members)+1)
	for _, m := range members {
		gone = append(gone, m.GUID)
	}
	gone = append(gone, 0x0b00000000000001)
	j, err = s.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1005, GUIDs: gone, CreatedBy: "ib-kubernetes",
		Request: "{}"})
	if err != nil {
		t.Fatalf("RemoveKubernetesGUIDs(5,001 GUIDs): %v", err)
	}
	got = job(t, s, j.ID)
	checkSummary(t, "removal's description", got.Description, "Remove GUIDs 0a00000000000001, ", 5001)
	checkSummary(t, "removal's result", got.Result, "GUIDs 0a00000000000001, ", 5000)
	if !strings.HasSuffix(got.Result, " (nothing to remove for 0b00000000000001)") {
		t.Errorf("removal's result %q does not name the GUID that was no member", got.Result)
	}
	// The request a job keeps is bounded too.
	huge := `{"name":"` + strings.Repeat("é", store.MaxRequest) + `"}`
	c := store.NetworkChange{Network: vlanNetwork(netA, 101), Operation: store.OpCreateNetwork, CreatedBy: "test",
		Request: huge}
	if j, err = s.RecordNetwork(ctx, c); err != nil {
		t.Fatalf("RecordNetwork with a request of %d bytes: %v", len(huge), err)
	}
	checkBounded(t, "request", job(t, s, j.ID).Request, huge, store.MaxRequest)
	// A body's bytes are kept as sent, but for what no engine stores: a
	// client's invalid UTF-8 (encoding/json decodes it without a word) and
	// NUL.
	c.Request = "{\"name\":\"caf\xe9 \x00\"}"
	c.Network.Name = "renamed" // a change, which keeps its request: one as recorded keeps none
	if j, err = s.RecordNetwork(ctx, c); err != nil {
		t.Fatalf("RecordNetwork with a request of invalid UTF-8: %v", err)
	}
	if got := job(t, s, j.ID).Request; got != "{\"name\":\"caf\uFFFD \uFFFD\"}" {
		t.Errorf("request of invalid UTF-8 kept as %q", got)
	}
}

// testLongNames: a network's name and a port's host longer than their
// varchar(255) are cut to 255 characters; a type or physical network longer
// than its column is refused, recording nothing.
func testLongNames(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	ctx := t.Context()
	spec := netSpec(netA, "vlan", "ibnet", vlanID(101))
	spec.Name = strings.Repeat("é", 300) + "\x00"
	mustNetwork(t, s, spec)
	mustPort(t, s, boundPort("p1", netA, guidA, strings.Repeat("ü", 300)))
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Networks) != 1 {
		t.Fatalf("Snapshot = %+v, %v", snap, err)
	}
	if want := strings.Repeat("é", 255); snap.Networks[0].Name != want {
		t.Errorf("name of %d characters, want 255 é", utf8.RuneCountInString(snap.Networks[0].Name))
	}
	p, err := s.GetPort(ctx, "p1")
	if want := strings.Repeat("ü", 255); err != nil || p.Host != want {
		t.Errorf("host of %d characters, %v; want 255 ü", utf8.RuneCountInString(p.Host), err)
	}
	for _, spec := range []store.NetworkSpec{
		netSpec(netB, strings.Repeat("v", 17), "ibnet", vlanID(102)),
		netSpec(netB, "vlan", strings.Repeat("p", 65), vlanID(102)),
	} {
		before := revision(t, s)
		_, err := recordNetwork(s, t, spec)
		var rejected *store.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "characters: want at most") {
			t.Errorf("network of type %d and physical network %d characters: %v; want refused",
				len(spec.Type), len(spec.PhysicalNetwork), err)
		}
		if after := revision(t, s); after != before {
			t.Errorf("refused network moved the revision from %d to %d", before, after)
		}
	}
}

// checkSummary fails the test unless a Kubernetes job's text names the
// first GUIDs (starting with prefix) and the pkey, and counts them all,
// in a few hundred bytes: summarised, not cut.
func checkSummary(t *testing.T, what, text, prefix string, total int) {
	t.Helper()
	inAll := fmt.Sprintf(" and %d more (%d in all)", total-8, total)
	if !strings.HasPrefix(text, prefix) || !strings.Contains(text, inAll) || !strings.Contains(text, "pkey 0x1005") ||
		strings.Contains(text, "see the manager's log") || len(text) > 1024 {
		t.Errorf("%s: %d bytes: %.300q; want the first GUIDs, %q and the pkey, in at most 1 KiB",
			what, len(text), text, inAll)
	}
}

func lastApply(t *testing.T, s *store.Store) store.Apply {
	t.Helper()
	a, err := s.LastApply(t.Context())
	if err != nil {
		t.Fatalf("LastApply: %v", err)
	}
	return a
}
