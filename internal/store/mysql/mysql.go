// Package mysql is the MariaDB (and MySQL) engine of the store, on
// go-sql-driver/mysql.
//
// The applier lock is GET_LOCK on a connection of its own. Galera does not
// replicate GET_LOCK, so on a node with wsrep_on the lock is refused
// (store.ErrLockNotClusterWide): two managers on two nodes would both apply.
// With [ha] ha = true the lease (lease.go) elects instead, on Galera too. There is no LISTEN: the applier polls
// the revision every [database] poll_interval.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"

	"github.com/go-sql-driver/mysql"
)

const lockName = "alternative-fabric-manager/applier"

// Engine is a store.Engine on MariaDB.
type Engine struct {
	db  *sql.DB
	q   *mysqldb.Queries
	log *slog.Logger

	// MariaDB has no LISTEN: Wake fires after the changes this process
	// commits; other replicas' changes are found by polling.
	store.LocalWake

	changes store.ChangeQueue // see store.ChangeQueue: queued here, not on the row lock
}

// Open connects with a go-sql-driver DSN (user:pass@tcp(host:port)/db?...).
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Engine, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	// Times are written and read as UTC whatever the server's time zone.
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// The HA lease compares NOW(6) with what NOW(6) wrote: in UTC, a daylight
	// saving change cannot stretch or cut it.
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, set := cfg.Params["time_zone"]; !set {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	// Without interpolation, every statement with arguments costs a prepare,
	// an execute and a close: three packets and two round trips instead of one,
	// and a change holds the revision's row lock across all of them. The
	// driver escapes arguments itself (and follows NO_BACKSLASH_ESCAPES),
	// which is only sound in a character set where no multibyte character
	// hides a backslash or quote byte. A DSN that sets interpolateParams
	// itself is obeyed.
	if interpolateByDefault(dsn) {
		cfg.InterpolateParams = true
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxLifetime(time.Hour)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: connect: %w", err)
	}
	return &Engine{db: db, q: mysqldb.New(db), log: log}, nil
}

// safeCharsets are the connection character sets in which no byte of a
// multibyte character can be a backslash or a quote: the driver's default
// (utf8mb4) and the other common ones.
var safeCharsets = map[string]bool{
	"utf8mb4": true, "utf8mb3": true, "utf8": true, "latin1": true, "ascii": true, "binary": true,
}

// interpolateByDefault says whether to turn argument interpolation on: the
// DSN leaves interpolateParams unset, and its charset (and collation) let the
// driver interpolate safely. The driver refuses interpolation with an unsafe
// collation but not with an unsafe charset such as gbk or sjis.
func interpolateByDefault(dsn string) bool {
	// As the driver reads a DSN: the parameters follow the last '/' (a
	// password may hold a '?' or a '/').
	_, query, _ := strings.Cut(dsn[strings.LastIndex(dsn, "/")+1:], "?")
	params, err := url.ParseQuery(query)
	if err != nil || params.Has("interpolateParams") {
		return false
	}
	for _, charset := range strings.Split(params.Get("charset"), ",") {
		if charset != "" && !safeCharsets[strings.ToLower(charset)] {
			return false
		}
	}
	collation := strings.ToLower(params.Get("collation"))
	charset, _, _ := strings.Cut(collation, "_")
	return collation == "" || safeCharsets[charset]
}

func (e *Engine) Name() string { return "mysql" }

func (e *Engine) Close() error { return e.db.Close() }

// Migrate applies the embedded migrations under goose's table locker.
func (e *Engine) Migrate(ctx context.Context) error {
	fsys, err := migrations.FS("mysql")
	if err != nil {
		return err
	}
	locker, err := lock.NewMySQLTableLocker()
	if err != nil {
		return err
	}
	return store.Migrate(ctx, goose.DialectMySQL, e.db, fsys, goose.WithLocker(locker))
}

func (e *Engine) Change(ctx context.Context, fn func(tx store.Tx, revision int64) error) error {
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
	q := e.q.WithTx(tx)
	// The UPDATE comes first: its row lock orders writers, and InnoDB's read view
	// is only taken at the first plain read, after the lock is ours. It hands
	// the new revision back as its last insert id (LAST_INSERT_ID(expr)).
	res, err := q.BumpRevision(ctx)
	if err != nil {
		return fmt.Errorf("bump revision: %w", err)
	}
	rev, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("read revision: %w", err)
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
	tx, err := e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return s, fmt.Errorf("snapshot: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	q := e.q.WithTx(tx)
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
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	q := e.q.WithTx(tx)
	if err := q.NewTerm(ctx, mysqldb.NewTermParams{Holder: holder, Heartbeat: &now}); err != nil {
		return 0, err
	}
	l, err := q.GetLeadership(ctx)
	if err != nil {
		return 0, err
	}
	return l.Term, tx.Commit()
}

func (e *Engine) MarkJobsRunning(ctx context.Context, term, revision int64, now time.Time) (int64, error) {
	return e.q.MarkJobsRunning(ctx, mysqldb.MarkJobsRunningParams{StartedAt: &now, Now: now, Revision: revision, Term: term})
}

func (e *Engine) CompleteJobs(ctx context.Context, term, revision int64, now time.Time) (int64, error) {
	return e.q.CompleteJobs(ctx, mysqldb.CompleteJobsParams{FinishedAt: &now, Now: now, Revision: revision, Term: term})
}

func (e *Engine) FailJobs(ctx context.Context, term, revision int64, reason string, now time.Time) (int64, error) {
	return e.q.FailJobs(ctx, mysqldb.FailJobsParams{Error: reason, FinishedAt: &now, Now: now, Revision: revision, Term: term})
}

func (e *Engine) RecordApply(ctx context.Context, a store.Apply) (bool, error) {
	n, err := e.q.InsertApply(ctx, mysqldb.InsertApplyParams{
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

// TryLock takes GET_LOCK on a connection reserved for as long as the lock is held.
func (e *Engine) TryLock(ctx context.Context) (store.Lock, error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock connection: %w", err)
	}
	q := mysqldb.New(conn)
	wsrep, err := q.WsrepOn(ctx)
	if err != nil {
		// Servers without Galera support have no @@wsrep_on at all.
		wsrep = 0
	}
	if wsrep != 0 {
		conn.Close()
		return nil, fmt.Errorf("%w: wsrep_on is set, and Galera does not replicate GET_LOCK; "+
			"with [ha] ha = true the lease elects on Galera", store.ErrLockNotClusterWide)
	}
	// After a cut link the server would keep this session, and the lock, for
	// as long as TCP takes to notice (hours): no manager could lead again.
	// The holder checks the lock every second, so a session idle for
	// store.LockSessionIdle has lost its client, and the server ends it.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", int(store.LockSessionIdle.Seconds()))); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock session: %w", err)
	}
	got, err := q.TryGetLock(ctx, lockName)
	if err != nil || got != 1 {
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("GET_LOCK: %w", err)
		}
		return nil, nil
	}
	return &getLock{conn: conn}, nil
}

type getLock struct{ conn *sql.Conn }

func (l *getLock) Check(ctx context.Context) error {
	held, err := mysqldb.New(l.conn).HoldsLock(ctx, lockName)
	if err != nil {
		return fmt.Errorf("check applier lock: %w", err)
	}
	if held != 1 {
		return errors.New("applier lock is no longer held by this session")
	}
	return nil
}

func (l *getLock) Release(ctx context.Context) error {
	if _, err := mysqldb.New(l.conn).ReleaseLock(ctx, lockName); err != nil {
		// The session may still hold the lock: make the pool drop the connection
		// (ending the session, and the lock with it) instead of reusing it.
		_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	if err := l.conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

func network(n mysqldb.Network) store.Network {
	return store.Network{ID: n.ID, Name: n.Name, Type: n.NetworkType, PhysicalNetwork: n.PhysicalNetwork,
		PKey: store.PKeyFromColumn(n.Pkey), Managed: n.Managed, Revision: n.Revision}
}

func port(p mysqldb.Port) (store.Port, error) {
	guid, err := store.GUIDFromColumn(p.ID, p.Guid)
	if err != nil {
		return store.Port{}, err
	}
	return store.Port{ID: p.ID, NetworkID: p.NetworkID, GUID: guid, Host: p.Host, Revision: p.Revision}, nil
}

type txn struct{ q *mysqldb.Queries }

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
	return t.q.UpsertNetwork(ctx, mysqldb.UpsertNetworkParams{ID: n.ID, Name: n.Name, NetworkType: n.Type,
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
	rows, err := t.q.GetPortsByIDOrGUID(ctx, mysqldb.GetPortsByIDOrGUIDParams{ID: id, Guid: store.GUIDColumn(guid)})
	if err != nil {
		return nil, err
	}
	return store.ConvertRows(rows, port)
}

func (t txn) UpsertPort(ctx context.Context, p store.Port, now time.Time) error {
	return t.q.UpsertPort(ctx, mysqldb.UpsertPortParams{ID: p.ID, NetworkID: p.NetworkID, Guid: store.GUIDColumn(p.GUID), Host: p.Host,
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
	return t.q.ClearGUIDsOfNetwork(ctx, mysqldb.ClearGUIDsOfNetworkParams{NetworkID: networkID, Revision: revision, Now: now})
}

func (t txn) InsertJob(ctx context.Context, j store.NewJob) (int64, error) {
	res, err := t.q.InsertJob(ctx, mysqldb.InsertJobParams{Revision: j.Revision, ObjectType: j.ObjectType,
		ObjectID: j.ObjectID, NetworkID: j.NetworkID, Operation: j.Operation, Status: j.Status, FinishedAt: j.FinishedAt,
		Description: j.Description, Result: j.Result, CreatedBy: j.CreatedBy, Request: j.Request, Now: j.Now})
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}
