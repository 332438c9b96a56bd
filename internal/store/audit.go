package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Audit is the last fabric audit's summary (internal/audit), as --status
// shows it and a new term's gates start from.
type Audit struct {
	Term      int64
	Revision  int64 // of the partitions file the tables were held against
	StartedAt time.Time
	Took      time.Duration
	Findings  int64
	Breaches  int64 // findings that keep jobs from completing
	// Summary is the audit's summary as JSON (internal/audit.Summary), at
	// most MaxAuditSummary bytes.
	Summary []byte
}

// MaxAuditSummary bounds an audit's JSON summary: the caller cuts the
// findings it lists to fit (MariaDB's mediumtext holds 16 MB; a text column
// of PostgreSQL and SQLite far more).
const MaxAuditSummary = 1 << 20

// RecordAudit keeps a as the last audit, fenced by the leadership term: a
// deposed leader's audit is not recorded (ErrFenced).
func (s *Store) RecordAudit(ctx context.Context, a Audit) error {
	if len(a.Summary) > MaxAuditSummary {
		return fmt.Errorf("record audit: a summary of %d bytes, more than %d", len(a.Summary), MaxAuditSummary)
	}
	if a.Findings < 0 || a.Breaches < 0 || a.Breaches > a.Findings {
		return fmt.Errorf("record audit: %d breaches of %d findings", a.Breaches, a.Findings)
	}
	n, err := s.d.Queries(ctx).UpsertLastAudit(ctx, driver.LastAuditRow{Fabric: s.FabricName(), Term: a.Term, Revision: a.Revision,
		StartedAt: a.StartedAt.UTC(), TookMs: a.Took.Milliseconds(), Findings: a.Findings, Breaches: a.Breaches,
		Summary: string(a.Summary)})
	switch {
	case err != nil:
		return fmt.Errorf("record audit: %w", err)
	case n == 0:
		return fmt.Errorf("record audit: %w", ErrFenced)
	}
	return nil
}

// LastAudit returns the last audit recorded; ok is false when none was.
func (s *Store) LastAudit(ctx context.Context) (a Audit, ok bool, err error) {
	rows, err := readRows(ctx, "last audit", s.FabricName(), s.d.Queries(ctx).LastAudit, func(r driver.LastAuditRow) Audit {
		return Audit{Term: r.Term, Revision: r.Revision, StartedAt: r.StartedAt.UTC(),
			Took: time.Duration(r.TookMs) * time.Millisecond, Findings: r.Findings, Breaches: r.Breaches,
			Summary: []byte(r.Summary)}
	})
	if err != nil || len(rows) == 0 {
		return Audit{}, false, err
	}
	return rows[0], true, nil
}
