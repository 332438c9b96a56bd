package mysql

import (
	"context"
	"time"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (e *Engine) UpdateOpenJobsDescription(ctx context.Context, term, revision int64, description string, now time.Time) (int64, error) {
	return e.q.DescribeOpenJobs(ctx, mysqldb.DescribeOpenJobsParams{
		Description: description, Now: now, Revision: revision, Term: term})
}

func (e *Engine) ReadLeadership(ctx context.Context) (store.Leadership, error) {
	l, err := e.q.ReadLeadership(ctx)
	if err != nil {
		return store.Leadership{}, err
	}
	return store.Leadership{Term: l.Term, Holder: l.Holder, Heartbeat: l.Heartbeat}, nil
}
