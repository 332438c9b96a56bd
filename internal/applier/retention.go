package applier

import (
	"context"
	"log/slog"
	"time"
)

// The retention, a service of the term (services.go): at the term's start,
// then every check interval, it deletes the finished jobs older than the
// job retention, then the applies older than it that no kept job or
// --status reads. It needs the term (its deletes are fenced by the term's
// id) but not its loop: it reads nothing the loop writes.

// retention deletes what the job retention lets go.
type retention struct {
	log  *slog.Logger
	st   Store
	term int64
	keep time.Duration // 0: nothing is deleted
}

func (t *term) retention() retention {
	return retention{log: t.Log, st: t.Store, term: t.id, keep: t.Cfg.JobRetention}
}

// prune deletes the finished jobs older than the retention, then the
// applies older than it that no kept job or --status reads (after the jobs:
// the applies that proved the jobs just deleted can go too).
func (r retention) prune(ctx context.Context) {
	if r.keep <= 0 {
		return
	}
	for _, p := range []struct {
		what   string // "jobs", "applies"
		delete func(ctx context.Context, term int64, retention time.Duration) (int64, error)
	}{
		{"jobs", r.st.DeleteExpiredJobs},
		{"applies", r.st.DeleteExpiredApplies},
	} {
		n, err := p.delete(ctx, r.term, r.keep)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("delete expired "+p.what, "error", err)
			}
			return
		}
		if n > 0 {
			r.log.Info("deleted expired "+p.what, p.what, n, "retention", r.keep)
		}
	}
}

// retentionService prunes at once, then every check interval; nil without
// a retention.
func (t *term) retentionService() *service {
	r := t.retention()
	if r.keep <= 0 {
		return nil
	}
	s := every("retention", t.Log, t.Cfg.CheckInterval, r.prune)
	s.first = true
	return s
}
