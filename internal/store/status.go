package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// What operators and the applier read about the applier's progress: who holds
// the applier lock (leadership), and why open jobs are not completing (their
// description, written by the applier while a gate is closed).

// Leadership is who won the applier lock last. Term 0 means no manager ever
// did. Heartbeat is when the holder last wrote the row (at least when its term
// began); nil before the first term.
type Leadership struct {
	Term      int64
	Holder    string // "<host> pid <pid>"
	Heartbeat *time.Time
}

// maxDescription bounds the line DescribeOpenJobs adds to a job's description
// (texts.go): the column holds more, but a reason listing a thousand switch
// ports helps nobody.
const maxDescription = 4000

// DescribeOpenJobs tells the open jobs up to revision why they are not
// completing, in a second line of their description (networking-mlnx and DBAs
// read it there), fenced by term: a manager that lost the applier lock changes
// nothing. Jobs that already say so are not written again; the line goes when
// the job completes or fails.
func (s *Store) DescribeOpenJobs(ctx context.Context, term, revision int64, reason string) (int64, error) {
	if strings.TrimSpace(reason) == "" {
		return 0, errors.New("describe open jobs: empty reason")
	}
	// One line: the first line of a description is what the job does.
	reason = oneLine(reason, maxDescription)
	n, err := s.d.Queries(ctx).DescribeOpenJobs(ctx, s.FabricName(), reason, s.now(), revision, term)
	if err != nil {
		return 0, fmt.Errorf("describe open jobs up to revision %d: %w", revision, err)
	}
	return n, nil
}

// DescribeJob is DescribeOpenJobs for job id alone, if it is still open and
// term still leads: a reason that names ports (the read-back proof's) is
// said to the jobs whose ports they are, not to every open job.
func (s *Store) DescribeJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	if strings.TrimSpace(reason) == "" {
		return 0, errors.New("describe job: empty reason")
	}
	n, err := s.d.Queries(ctx).DescribeJob(ctx, oneLine(reason, maxDescription), s.now(), id, s.FabricName(), term)
	if err != nil {
		return 0, fmt.Errorf("describe job %d: %w", id, err)
	}
	return n, nil
}

// Heartbeat records that the holder of term still holds the applier lock, for
// --status; it is ErrFenced once the database no longer records term as the
// current one.
func (s *Store) Heartbeat(ctx context.Context, term int64) error {
	now := s.now()
	n, err := s.d.Queries(ctx).Heartbeat(ctx, s.FabricName(), &now, term)
	if err != nil {
		return fmt.Errorf("heartbeat of term %d: %w", term, err)
	}
	if n == 0 {
		// No row changed: MariaDB says so too when the time written is the
		// one already there, so ask which term is recorded. Another term than
		// ours: another term started, or the database was restored from a
		// backup taken in an earlier term.
		l, err := s.Leadership(ctx)
		if err != nil {
			return fmt.Errorf("heartbeat of term %d: %w", term, err)
		}
		if l.Term != term {
			return fmt.Errorf("heartbeat of term %d (term %d recorded): %w", term, l.Term, ErrFenced)
		}
	}
	return nil
}

// Leadership returns who holds (or last held) the applier lock, and its term.
func (s *Store) Leadership(ctx context.Context) (Leadership, error) {
	row, err := s.d.Queries(ctx).Leadership(ctx, s.FabricName())
	if err != nil {
		return Leadership{}, fmt.Errorf("leadership: %w", err)
	}
	l := Leadership{Term: row.Term, Holder: row.Holder, Heartbeat: row.Heartbeat}
	if l.Heartbeat != nil {
		h := l.Heartbeat.UTC()
		l.Heartbeat = &h
	}
	return l, nil
}

// OldestOpenJobs returns when the oldest Pending and the oldest Running job
// were created; a status without jobs is absent.
func (s *Store) OldestOpenJobs(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, status := range []string{StatusPending, StatusRunning} {
		t, err := s.d.Queries(ctx).OldestOpenJob(ctx, s.FabricName(), status)
		switch {
		case errors.Is(notFound(err), ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("oldest %s job: %w", status, err)
		default:
			out[status] = t.UTC()
		}
	}
	return out, nil
}
