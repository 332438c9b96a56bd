// Package postgres is the PostgreSQL engine of the store, on pgx/v5.
//
// The applier lock is a session advisory lock on a connection of its own (never
// through a transaction-pooling bouncer: the lock would strand on a pooled
// backend). Wake-ups come from LISTEN on another dedicated connection; the
// state table's trigger NOTIFYs at every committed revision.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"
)

// lockKey names the applier lock among other advisory locks of the database.
const lockKey int64 = 0x61666d5f6170706c // "afm_appl"

const notifyChannel = "afm_revision"

// Engine is a store.Engine on PostgreSQL.
type Engine struct {
	dsn  string
	pool *pgxpool.Pool
	q    *pgdb.Queries
	log  *slog.Logger

	changes store.ChangeQueue // see store.ChangeQueue: queued here, not on the row lock
}

// Open connects to the database at dsn (a postgres:// URL).
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Engine, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return &Engine{dsn: dsn, pool: pool, q: pgdb.New(pool), log: log}, nil
}

func (e *Engine) Name() string { return "postgres" }

func (e *Engine) Close() error { e.pool.Close(); return nil }

// Migrate applies the embedded migrations, under goose's advisory-lock locker
// so that two managers starting together do not both migrate.
func (e *Engine) Migrate(ctx context.Context) error {
	fsys, err := migrations.FS("postgres")
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(e.pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	return store.Migrate(ctx, goose.DialectPostgres, db, fsys, goose.WithSessionLocker(locker))
}

func (e *Engine) Change(ctx context.Context, fn func(tx store.Tx, revision int64) error) error {
	leave, err := e.changes.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		q := e.q.WithTx(tx)
		rev, err := q.BumpRevision(ctx)
		if err != nil {
			return fmt.Errorf("bump revision: %w", err)
		}
		return fn(txn{q}, rev)
	})
}

func (e *Engine) Revision(ctx context.Context) (int64, error) { return e.q.GetRevision(ctx) }

func (e *Engine) Snapshot(ctx context.Context) (store.Snapshot, error) {
	var s store.Snapshot
	err := pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			q := e.q.WithTx(tx)
			var err error
			if s.Revision, err = q.GetRevision(ctx); err != nil {
				return err
			}
			nets, err := q.ListManagedNetworks(ctx)
			if err != nil {
				return err
			}
			for _, n := range nets {
				s.Networks = append(s.Networks, network(n))
			}
			members, err := q.ListMembers(ctx)
			if err != nil {
				return err
			}
			for _, m := range members {
				member, err := store.MemberFromColumns(m.NetworkID, m.Guid)
				if err != nil {
					return err
				}
				s.Members = append(s.Members, member)
			}
			return nil
		})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return s, nil
}

func (e *Engine) GetJob(ctx context.Context, id int64) (store.Job, error) {
	j, err := e.q.GetJob(ctx, id)
	if err != nil {
		return store.Job{}, notFound(err)
	}
	return store.Job(j), nil
}

func (e *Engine) CountJobsByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := e.q.CountJobsByStatus(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

func (e *Engine) NewTerm(ctx context.Context, holder string, now time.Time) (int64, error) {
	return e.q.NewTerm(ctx, pgdb.NewTermParams{Holder: holder, Now: &now})
}

func (e *Engine) MarkJobsRunning(ctx context.Context, term, revision int64, now time.Time) (int64, error) {
	return e.q.MarkJobsRunning(ctx, pgdb.MarkJobsRunningParams{Now: &now, Revision: revision, Term: term})
}

func (e *Engine) CompleteJobs(ctx context.Context, term, revision int64, now time.Time) (int64, error) {
	return e.q.CompleteJobs(ctx, pgdb.CompleteJobsParams{Now: &now, Revision: revision, Term: term})
}

func (e *Engine) FailJobs(ctx context.Context, term, revision int64, reason string, now time.Time) (int64, error) {
	return e.q.FailJobs(ctx, pgdb.FailJobsParams{Error: reason, Now: &now, Revision: revision, Term: term})
}

func (e *Engine) RecordApply(ctx context.Context, a store.Apply) (bool, error) {
	n, err := e.q.InsertApply(ctx, pgdb.InsertApplyParams{
		Revision: a.Revision, Sha256: a.SHA256, Term: a.Term, Outcome: a.Outcome, Detail: a.Detail,
		StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
	})
	return n == 1, err
}

func (e *Engine) LastApply(ctx context.Context) (store.Apply, error) {
	a, err := e.q.LastApply(ctx)
	if err != nil {
		return store.Apply{}, notFound(err)
	}
	return store.Apply{Revision: a.Revision, SHA256: a.Sha256, Term: a.Term, Outcome: a.Outcome,
		Detail: a.Detail, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt}, nil
}

// TryLock takes the advisory lock on a new connection that lives as long as the lock.
func (e *Engine) TryLock(ctx context.Context) (store.Lock, error) {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return nil, fmt.Errorf("lock connection: %w", err)
	}
	// After a cut link the server would keep this session, and the lock, for
	// as long as TCP takes to notice (hours): no manager could lead again.
	// The holder checks the lock every second, so a session idle for
	// store.LockSessionIdle has lost its client, and the server ends it.
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", store.LockSessionIdle.Milliseconds())); err != nil {
		e.log.Warn("idle_session_timeout not set on the lock's session (PostgreSQL 14 or later has it): "+
			"after a network cut the lock stays held until the server notices the dead connection", "error", err)
	}
	ok, err := pgdb.New(conn).TryAdvisoryLock(ctx, lockKey)
	if err != nil || !ok {
		conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("pg_try_advisory_lock: %w", err)
		}
		return nil, nil
	}
	return &advisoryLock{conn: conn}, nil
}

type advisoryLock struct{ conn *pgx.Conn }

// Check asks, on the lock's own session, whether that session still holds it.
// Any error (connection gone, server restarted) means it may be lost.
func (l *advisoryLock) Check(ctx context.Context) error {
	n, err := pgdb.New(l.conn).HoldsAdvisoryLock(ctx, lockKey)
	if err != nil {
		return fmt.Errorf("check applier lock: %w", err)
	}
	if n != 1 {
		return errors.New("applier lock is no longer held by this session")
	}
	return nil
}

func (l *advisoryLock) Release(ctx context.Context) error {
	// Closing the session releases the lock whatever state it is in.
	return l.conn.Close(ctx)
}

// Wake LISTENs on a dedicated connection, reconnecting with backoff, until ctx ends.
func (e *Engine) Wake(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := e.listen(ctx, ch)
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("revision listener stopped; reconnecting", "error", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
		}
	}()
	return ch
}

func (e *Engine) listen(ctx context.Context, ch chan<- struct{}) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(cctx, e.dsn)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	signal(ch) // a change may have committed before LISTEN took effect
	for {
		// Wake up now and then to ping: a dead peer is only noticed on read.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			signal(ch)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// The ping has a deadline too: on a black-holed connection it
			// would wait as long as TCP does.
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

func network(n pgdb.Network) store.Network {
	return store.Network{ID: n.ID, Name: n.Name, Type: n.NetworkType, PhysicalNetwork: n.PhysicalNetwork,
		PKey: store.PKeyFromColumn(n.Pkey), Managed: n.Managed, Revision: n.Revision}
}

func port(p pgdb.Port) (store.Port, error) {
	guid, err := store.GUIDFromColumn(p.ID, p.Guid)
	if err != nil {
		return store.Port{}, err
	}
	return store.Port{ID: p.ID, NetworkID: p.NetworkID, GUID: guid, Host: p.Host, Revision: p.Revision}, nil
}

// txn is a change transaction.
type txn struct{ q *pgdb.Queries }

func (t txn) GetNetwork(ctx context.Context, id string) (store.Network, error) {
	n, err := t.q.GetNetwork(ctx, id)
	if err != nil {
		return store.Network{}, notFound(err)
	}
	return network(n), nil
}

func (t txn) GetNetworkByPKey(ctx context.Context, pkey fabric.PKey) (store.Network, error) {
	n, err := t.q.GetNetworkByPKey(ctx, store.PKeyColumn[int32](&pkey))
	if err != nil {
		return store.Network{}, notFound(err)
	}
	return network(n), nil
}

func (t txn) UpsertNetwork(ctx context.Context, n store.Network, now time.Time) error {
	return t.q.UpsertNetwork(ctx, pgdb.UpsertNetworkParams{ID: n.ID, Name: n.Name, NetworkType: n.Type,
		PhysicalNetwork: n.PhysicalNetwork, Pkey: store.PKeyColumn[int32](n.PKey), Managed: n.Managed, Revision: n.Revision, Now: now})
}

func (t txn) DeleteNetwork(ctx context.Context, id string) (bool, error) {
	n, err := t.q.DeleteNetwork(ctx, id)
	return n > 0, err
}

func (t txn) GetPort(ctx context.Context, id string) (store.Port, error) {
	p, err := t.q.GetPort(ctx, id)
	if err != nil {
		return store.Port{}, notFound(err)
	}
	return port(p)
}

func (t txn) GetPortsByIDOrGUID(ctx context.Context, id string, guid *fabric.GUID) ([]store.Port, error) {
	rows, err := t.q.GetPortsByIDOrGUID(ctx, pgdb.GetPortsByIDOrGUIDParams{ID: id, Guid: store.GUIDColumn(guid)})
	if err != nil {
		return nil, err
	}
	return store.ConvertRows(rows, port)
}

func (t txn) UpsertPort(ctx context.Context, p store.Port, now time.Time) error {
	return t.q.UpsertPort(ctx, pgdb.UpsertPortParams{ID: p.ID, NetworkID: p.NetworkID, Guid: store.GUIDColumn(p.GUID), Host: p.Host,
		Revision: p.Revision, Now: now})
}

func (t txn) DeletePort(ctx context.Context, id string) (bool, error) {
	n, err := t.q.DeletePort(ctx, id)
	return n > 0, err
}

func (t txn) DeletePortsOfNetwork(ctx context.Context, networkID string) (int64, error) {
	return t.q.DeletePortsOfNetwork(ctx, networkID)
}

func (t txn) KeepRevision(ctx context.Context) error { return t.q.UnbumpRevision(ctx) }

func (t txn) ClearGUIDsOfNetwork(ctx context.Context, networkID string, revision int64, now time.Time) (int64, error) {
	return t.q.ClearGUIDsOfNetwork(ctx, pgdb.ClearGUIDsOfNetworkParams{NetworkID: networkID, Revision: revision, Now: now})
}

func (t txn) InsertJob(ctx context.Context, j store.NewJob) (int64, error) {
	return t.q.InsertJob(ctx, pgdb.InsertJobParams{Revision: j.Revision, ObjectType: j.ObjectType,
		ObjectID: j.ObjectID, NetworkID: j.NetworkID, Operation: j.Operation, Status: j.Status, FinishedAt: j.FinishedAt,
		Description: j.Description, Result: j.Result, CreatedBy: j.CreatedBy, Request: j.Request, Now: j.Now})
}
