package sqlite

import (
	"context"
	"time"

	sqlitedb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/sqlite"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (e *Engine) UpdateOpenJobsDescription(ctx context.Context, term, revision int64, reason string, now time.Time) (int64, error) {
	return e.q.DescribeOpenJobs(ctx, sqlitedb.DescribeOpenJobsParams{
		Reason: reason, Now: now, Revision: revision, Term: term})
}

func (e *Engine) ReadLeadership(ctx context.Context) (store.Leadership, error) {
	l, err := e.q.ReadLeadership(ctx)
	if err != nil {
		return store.Leadership{}, err
	}
	return store.Leadership{Term: l.Term, Holder: l.Holder, Heartbeat: l.Heartbeat}, nil
}

func (e *Engine) WriteHeartbeat(ctx context.Context, term int64, now time.Time) (int64, error) {
	return e.q.Heartbeat(ctx, sqlitedb.HeartbeatParams{Now: &now, Term: term})
}

func (e *Engine) OldestOpenJob(ctx context.Context, status string) (time.Time, error) {
	t, err := e.q.OldestOpenJob(ctx, status)
	return t, notFound(err)
}
