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

// StatusTables is what each engine does for status and gates.
type StatusTables interface {
	// UpdateOpenJobsDescription sets the description of the open jobs (Pending,
	// Running) with a revision up to revision, if term is the current
	// leadership term; it returns how many jobs changed.
	UpdateOpenJobsDescription(ctx context.Context, term, revision int64, description string, now time.Time) (int64, error)
	// ReadLeadership returns the leadership row.
	ReadLeadership(ctx context.Context) (Leadership, error)
}

// Leadership is who won the applier lock last. Term 0 means no manager ever
// did. Heartbeat is when the holder last wrote the row (at least when its term
// began); nil before the first term.
type Leadership struct {
	Term      int64
	Holder    string // "<host> pid <pid>"
	Heartbeat *time.Time
}

// maxDescription bounds what a job's description may hold: the column is text
// on every engine, but a reason listing a thousand switch ports helps nobody.
const maxDescription = 4000

// DescribeOpenJobs tells the open jobs up to revision why they are not
// completing, fenced by term: a manager that lost the applier lock changes
// nothing. Jobs that already say so are not written again.
func (s *Store) DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error) {
	if strings.TrimSpace(description) == "" {
		return 0, errors.New("describe open jobs: empty description")
	}
	if len(description) > maxDescription {
		description = description[:maxDescription-3] + "..."
	}
	n, err := s.UpdateOpenJobsDescription(ctx, term, revision, description, s.now())
	if err != nil {
		return 0, fmt.Errorf("describe open jobs up to revision %d: %w", revision, err)
	}
	return n, nil
}

// Leadership returns who holds (or last held) the applier lock, and its term.
func (s *Store) Leadership(ctx context.Context) (Leadership, error) {
	l, err := s.ReadLeadership(ctx)
	if err != nil {
		return Leadership{}, fmt.Errorf("leadership: %w", err)
	}
	if l.Heartbeat != nil {
		h := l.Heartbeat.UTC()
		l.Heartbeat = &h
	}
	return l, nil
}
