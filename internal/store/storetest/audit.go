package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// auditTests cover the last_audit table.
var auditTests = []storeTest{
	{"LastAuditIsReplacedAndFenced", testLastAudit},
	{"LastAuditRefusesWhatItCannotKeep", testLastAuditRefused},
}

// Every audit replaces the last one; a deposed leader's is not kept; what
// was recorded reads back as it was, the summary byte for byte.
func testLastAudit(t *testing.T, s *store.Store) {
	ctx := t.Context()
	if _, ok, err := s.LastAudit(ctx); err != nil || ok {
		t.Fatalf("LastAudit of a new database: ok %t, %v; want none", ok, err)
	}
	old, err := s.NewTerm(ctx, "deposed")
	if err != nil {
		t.Fatal(err)
	}
	term, err := s.NewTerm(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 8, 0, 0, 123456000, time.UTC)
	first := store.Audit{Term: term, Revision: 7, StartedAt: at, Took: 42 * time.Millisecond, Findings: 3, Breaches: 1,
		Summary: []byte(`{"findings":[{"kind":"foreign_pkey","text":"port 0x0002c90300000101 holds pkey 0x0064"}]}`)}
	if err := s.RecordAudit(ctx, first); err != nil {
		t.Fatal(err)
	}
	clean := store.Audit{Term: term, Revision: 8, StartedAt: at.Add(time.Minute), Took: time.Second, Summary: []byte(`{}`)}
	if err := s.RecordAudit(ctx, clean); err != nil {
		t.Fatal(err)
	}
	stale := store.Audit{Term: old, Revision: 9, StartedAt: at.Add(2 * time.Minute), Findings: 1, Breaches: 1, Summary: []byte(`{}`)}
	if err := s.RecordAudit(ctx, stale); !errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordAudit of a deposed term = %v; want ErrFenced", err)
	}
	got, ok, err := s.LastAudit(ctx)
	if err != nil || !ok {
		t.Fatalf("LastAudit: ok %t, %v", ok, err)
	}
	if got.Term != term || got.Revision != 8 || !got.StartedAt.Equal(clean.StartedAt) || got.Took != time.Second ||
		got.Findings != 0 || got.Breaches != 0 || string(got.Summary) != `{}` {
		t.Errorf("LastAudit = %+v; want %+v", got, clean)
	}
	if err := s.RecordAudit(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.LastAudit(ctx); got.Breaches != 1 || string(got.Summary) != string(first.Summary) ||
		!got.StartedAt.Equal(at) {
		t.Errorf("LastAudit after a breach = %+v; want %+v", got, first)
	}
}

// A summary too large, or counts that contradict each other, are refused and
// leave the last audit as it was.
func testLastAuditRefused(t *testing.T, s *store.Store) {
	ctx := t.Context()
	term, err := s.NewTerm(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []store.Audit{
		{Term: term, Summary: []byte(strings.Repeat("x", store.MaxAuditSummary+1))},
		{Term: term, Findings: 1, Breaches: 2, Summary: []byte(`{}`)},
	} {
		if err := s.RecordAudit(ctx, a); err == nil {
			t.Errorf("RecordAudit of %d bytes, %d breaches of %d findings: accepted", len(a.Summary), a.Breaches, a.Findings)
		}
	}
	if _, ok, err := s.LastAudit(ctx); err != nil || ok {
		t.Errorf("LastAudit after refusals: ok %t, %v; want none", ok, err)
	}
}
