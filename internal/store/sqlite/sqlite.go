// Package sqlite is the embedded single-node engine of the store, on
// modernc.org/sqlite (no cgo).
//
// One manager process owns the database: the applier lock is an OS file lock
// beside it, and wake-ups are signalled in process after each committed change.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pressly/goose/v3"

	sqlitedb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/sqlite"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"

	// The driver registers itself as "sqlite".
	_ "modernc.org/sqlite"
)

// Engine is a store.Engine on an SQLite file.
type Engine struct {
	path string
	db   *sql.DB
	q    *sqlitedb.Queries
	log  *slog.Logger

	store.LocalWake // Wake fires after every change this process commits

	// changes queue in process: SQLite has one writer anyway, and its busy
	// handler would have a waiting change sleep and retry (1, 2, 5, 10 ms and
	// longer) while holding one of the few connections.
	changes store.ChangeQueue

	// prepared are the queries prepared once (the driver would parse each
	// statement at every use): nil until the first change or job read after
	// the schema exists. See queries.
	prepareMu sync.Mutex
	tried     bool
	prepared  atomic.Pointer[sqlitedb.Queries]
}

// Open opens (creating if needed) the database file at path.
func Open(ctx context.Context, path string, log *slog.Logger) (*Engine, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("sqlite: database path %q is not absolute", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// WAL lets job polls read while a change commits; BEGIN IMMEDIATE makes
	// writers queue on busy_timeout instead of failing on a lock upgrade.
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// Every connection is kept: the database/sql default of two idle ones would
	// close and reopen connections (re-running the pragmas and re-reading the
	// schema) whenever more than two requests overlap.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return &Engine{path: path, db: db, q: sqlitedb.New(db), log: log}, nil
}

func (e *Engine) Name() string { return "sqlite" }

func (e *Engine) Close() error {
	if q := e.prepared.Load(); q != nil {
		q.Close()
	}
	return e.db.Close()
}

// queries returns the prepared queries, preparing them at the first call, or
// the first after a migration: a statement can be prepared only once the
// tables it names exist. Until that succeeds it returns the unprepared ones,
// which do the same work, parsing each statement at every use. Call it
// outside a transaction: preparing takes a connection of the pool.
func (e *Engine) queries(ctx context.Context) *sqlitedb.Queries {
	if q := e.prepared.Load(); q != nil {
		return q
	}
	e.prepareMu.Lock()
	defer e.prepareMu.Unlock()
	if q := e.prepared.Load(); q != nil {
		return q
	}
	if e.tried {
		return e.q
	}
	e.tried = true
	q, err := sqlitedb.Prepare(ctx, e.db)
	if err != nil {
		e.log.Debug("sqlite: statements left unprepared", "error", err)
		return e.q
	}
	e.prepared.Store(q)
	return q
}

func (e *Engine) Migrate(ctx context.Context) error {
	fsys, err := migrations.FS("sqlite")
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx, goose.DialectSQLite3, e.db, fsys); err != nil {
		return err
	}
	// The schema may only now hold every table: let queries prepare again.
	e.prepareMu.Lock()
	e.tried = false
	e.prepareMu.Unlock()
	return nil
}

func (e *Engine) Change(ctx context.Context, fn func(tx store.Tx, revision int64) error) error {
	queries := e.queries(ctx)
	leave, err := e.changes.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	q := queries.WithTx(tx)
	rev, err := q.BumpRevision(ctx)
	if err != nil {
		return fmt.Errorf("bump revision: %w", err)
	}
	if err := fn(txn{q}, rev); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	e.Notify()
	return nil
}

func (e *Engine) Revision(ctx context.Context) (int64, error) { return e.q.GetRevision(ctx) }

func (e *Engine) Snapshot(ctx context.Context) (store.Snapshot, error) {
	var s store.Snapshot
	queries := e.queries(ctx)
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return s, fmt.Errorf("snapshot: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	q := queries.WithTx(tx)
	if s.Revision, err = q.GetRevision(ctx); err != nil {
		return s, fmt.Errorf("snapshot: %w", err)
	}
	nets, err := q.ListManagedNetworks(ctx)
	if err != nil {
		return s, fmt.Errorf("snapshot: %w", err)
	}
	for _, n := range nets {
		s.Networks = append(s.Networks, network(n))
	}
	members, err := q.ListMembers(ctx)
	if err != nil {
		return s, fmt.Errorf("snapshot: %w", err)
	}
	for _, m := range members {
		member, err := store.MemberFromColumns(m.NetworkID, m.Guid)
		if err != nil {
			return s, fmt.Errorf("snapshot: %w", err)
		}
		s.Members = append(s.Members, member)
	}
	return s, nil
}

func (e *Engine) GetJob(ctx context.Context, id int64) (store.Job, error) {
	j, err := e.queries(ctx).GetJob(ctx, id)
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
	return e.q.NewTerm(ctx, sqlitedb.NewTermParams{Holder: holder, Now: &now})
}

func (e *Engine) MarkJobsRunning(ctx context.Context, term, revision int64, now time.Time) (int64, error) {
	return e.q.MarkJobsRunning(ctx, sqlitedb.MarkJobsRunningParams{Now: &now, Revision: revision, Term: term})
}

func (e *Engine) CompleteJobs(ctx context.Context, term, revision int64, now time.Time) (int64, error) {
	return e.q.CompleteJobs(ctx, sqlitedb.CompleteJobsParams{Now: &now, Revision: revision, Term: term})
}

func (e *Engine) FailJobs(ctx context.Context, term, revision int64, reason string, now time.Time) (int64, error) {
	return e.q.FailJobs(ctx, sqlitedb.FailJobsParams{Error: reason, Now: &now, Revision: revision, Term: term})
}

func (e *Engine) FailJob(ctx context.Context, term, id int64, reason string, now time.Time) (int64, error) {
	return e.q.FailJob(ctx, sqlitedb.FailJobParams{Error: reason, Now: &now, ID: id, Term: term})
}

func (e *Engine) OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error) {
	rows, err := e.q.OpenJobsWithGUIDs(ctx, revision)
	if err != nil {
		return nil, err
	}
	out := make([]store.OpenJob, len(rows))
	for i, r := range rows {
		if out[i], err = store.OpenJobFromColumns(r.ID, r.ObjectType, r.ObjectID, r.NetworkID, r.Guid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *Engine) RecordApply(ctx context.Context, a store.Apply) (bool, error) {
	n, err := e.q.InsertApply(ctx, sqlitedb.InsertApplyParams{
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

// TryLock takes an exclusive flock on "<database>.lock". The kernel drops it when
// the process dies, so a crashed manager never leaves it behind.
func (e *Engine) TryLock(ctx context.Context) (store.Lock, error) {
	f, err := os.OpenFile(e.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("applier lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("applier lock %s: %w", f.Name(), err)
	}
	return &fileLock{f: f}, nil
}

type fileLock struct{ f *os.File }

// Check: a flock held through an open descriptor cannot be taken away.
func (l *fileLock) Check(context.Context) error { return nil }

func (l *fileLock) Release(context.Context) error { return l.f.Close() }

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

func network(n sqlitedb.Network) store.Network {
	return store.Network{ID: n.ID, Name: n.Name, Type: n.NetworkType, PhysicalNetwork: n.PhysicalNetwork,
		PKey: store.PKeyFromColumn(n.Pkey), Managed: n.Managed, Revision: n.Revision}
}

func port(p sqlitedb.Port) (store.Port, error) {
	guid, err := store.GUIDFromColumn(p.ID, p.Guid)
	if err != nil {
		return store.Port{}, err
	}
	return store.Port{ID: p.ID, NetworkID: p.NetworkID, GUID: guid, Host: p.Host, Revision: p.Revision}, nil
}

type txn struct{ q *sqlitedb.Queries }

func (t txn) GetNetwork(ctx context.Context, id string) (store.Network, error) {
	n, err := t.q.GetNetwork(ctx, id)
	if err != nil {
		return store.Network{}, notFound(err)
	}
	return network(n), nil
}

func (t txn) GetNetworkByPKey(ctx context.Context, pkey fabric.PKey) (store.Network, error) {
	n, err := t.q.GetNetworkByPKey(ctx, store.PKeyColumn[int64](&pkey))
	if err != nil {
		return store.Network{}, notFound(err)
	}
	return network(n), nil
}

func (t txn) UpsertNetwork(ctx context.Context, n store.Network, now time.Time) error {
	return t.q.UpsertNetwork(ctx, sqlitedb.UpsertNetworkParams{ID: n.ID, Name: n.Name, NetworkType: n.Type,
		PhysicalNetwork: n.PhysicalNetwork, Pkey: store.PKeyColumn[int64](n.PKey), Managed: n.Managed, Revision: n.Revision, Now: now})
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
	rows, err := t.q.GetPortsByIDOrGUID(ctx, sqlitedb.GetPortsByIDOrGUIDParams{ID: id, Guid: store.GUIDColumn(guid)})
	if err != nil {
		return nil, err
	}
	return store.ConvertRows(rows, port)
}

func (t txn) UpsertPort(ctx context.Context, p store.Port, now time.Time) error {
	return t.q.UpsertPort(ctx, sqlitedb.UpsertPortParams{ID: p.ID, NetworkID: p.NetworkID, Guid: store.GUIDColumn(p.GUID), Host: p.Host,
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
	return t.q.ClearGUIDsOfNetwork(ctx, sqlitedb.ClearGUIDsOfNetworkParams{NetworkID: networkID, Revision: revision, Now: now})
}

func (t txn) InsertJob(ctx context.Context, j store.NewJob) (int64, error) {
	return t.q.InsertJob(ctx, sqlitedb.InsertJobParams{Revision: j.Revision, ObjectType: j.ObjectType,
		ObjectID: j.ObjectID, NetworkID: j.NetworkID, Operation: j.Operation, Status: j.Status, FinishedAt: j.FinishedAt,
		Description: j.Description, Result: j.Result, CreatedBy: j.CreatedBy, Request: j.Request, Now: j.Now})
}
