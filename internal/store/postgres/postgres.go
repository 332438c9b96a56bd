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
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// lockKey names the applier lock among other advisory locks of the database.
const lockKey int64 = 0x61666d5f6170706c // "afm_appl"

const notifyChannel = "afm_revision"

// Engine is the PostgreSQL driver.Driver.
type Engine struct {
	dsn  string
	pool *pgxpool.Pool
	q    *pgdb.Queries
	log  *slog.Logger
	// pause is a test hook's (driver.PauseInsideFinish); nil in production.
	pause func(ctx context.Context)
	// local wakes this process's waiters after its own commits, at once:
	// the server's notification of them comes a round trip later.
	local driver.LocalWake
}

// Open connects to the database at dsn (a postgres:// URL).
func Open(ctx context.Context, dsn string, log *slog.Logger, opts ...driver.Option) (*Engine, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.PrepareConn = dropClosedIdle
	idleTransaction(cfg.ConnConfig.RuntimeParams, driver.OptionsOf(opts...).IdleTransaction)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return &Engine{dsn: dsn, pool: pool, q: pgdb.New(pool), log: log, pause: driver.PauseInsideFinish(log)}, nil
}

// idleTransactionParam is the setting that has the server end a session
// idle inside a transaction (PostgreSQL 9.6 and later).
const idleTransactionParam = "idle_in_transaction_session_timeout"

// idleTransaction sets, among a connection's startup parameters (params),
// the server's bound on a session idle inside a transaction to idle
// (driver.Options.IdleTransaction), unless the DSN sets it, as a parameter of
// its own or in options. The fence takes no lock here, but a session cut off
// inside a change keeps its rows' locks (a job's, the revision's) until the
// server's TCP keepalive notices (2 hours by default): the next leader's
// completion of those jobs, and every change, would wait as long.
func idleTransaction(params map[string]string, idle time.Duration) {
	if _, set := params[idleTransactionParam]; set || idle <= 0 || strings.Contains(params["options"], idleTransactionParam) {
		return
	}
	params[idleTransactionParam] = fmt.Sprint(idle.Milliseconds())
}

func (e *Engine) Name() string { return "postgres" }

func (e *Engine) Close() error { e.pool.Close(); return nil }

// Migrate applies the embedded migrations, under goose's advisory-lock locker
// so that two managers starting together do not both migrate.
func (e *Engine) Migrate(ctx context.Context) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(e.pool)
	defer db.Close()
	return e.migrations(db, goose.WithSessionLocker(locker)).Up(ctx)
}

func (e *Engine) Schema(ctx context.Context) (driver.SchemaVersions, error) {
	db := stdlib.OpenDBFromPool(e.pool)
	defer db.Close()
	return e.migrations(db, nil).Schema(ctx)
}

func (e *Engine) migrations(db *sql.DB, locker goose.ProviderOption) driver.Migrations {
	return driver.Migrations{Engine: "postgres", Dialect: goose.DialectPostgres, DB: db, Locker: locker}
}

// InTx runs fn in one transaction: READ COMMITTED for writes (each
// statement sees what committed before it: an insert that met another
// transaction's row of the same name sees the winner's value), REPEATABLE
// READ READ ONLY for the snapshot (one consistent state, no lock).
func (e *Engine) InTx(ctx context.Context, mode driver.TxMode, fn func(q driver.Queries) error) error {
	if mode == driver.ReadOnly {
		return e.inReadTx(ctx, fn)
	}
	return pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(queries{e.q.WithTx(tx)}) })
}

// readBegin begins a read-only transaction (InTx).
const readBegin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

// inReadTx is InTx's read-only transaction, whose BEGIN is held to go with
// its first query, in one round trip (as InChangeTx's): every read of the
// API and of the applier's snapshot is one round trip shorter. A
// transaction that ran no query never began.
func (e *Engine) inReadTx(ctx context.Context, fn func(q driver.Queries) error) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection still inside a transaction (its ROLLBACK could not be
	// sent) is closed by Release, never handed out again.
	defer conn.Release()
	p := &pipeline{tx: conn}
	p.held.Hold(readBegin)
	if err := fn(queries{pgdb.New(p)}); err != nil {
		p.rollback(ctx)
		return err
	}
	if len(p.held.Take()) > 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		p.rollback(ctx)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// InChangeTx runs fn in one READ COMMITTED transaction, as a Write. The
// state table's trigger notifies the listeners of every manager at commit;
// this process's waiters are woken as soon as the COMMIT has answered, with
// the revision fn set, if any (driver.WithCommitted), once the transaction's
// connection is back in the pool: the applier woken reads the snapshot on
// it, where a connection idle for long would cost a ping first.
func (e *Engine) InChangeTx(ctx context.Context, fn func(tx driver.ChangeTx) error) error {
	if err := e.inChangeTx(ctx, fn); err != nil {
		return err
	}
	if c := driver.CommittedOf(ctx); c != nil {
		e.local.NotifyCommitted(c)
	}
	return nil
}

// inChangeTx is InChangeTx but the wake-up. The transaction is begun and
// committed with plain statements, held like the others (driver.ChangeTx):
// BEGIN goes with the first statement (the revision's UPDATE, itself held
// to go with the first read) and COMMIT with whatever fn left held (the
// revision's final value, sent by the pipeline's Exec), so that neither
// costs a round trip of its own.
func (e *Engine) inChangeTx(ctx context.Context, fn func(tx driver.ChangeTx) error) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection still inside a transaction (its ROLLBACK could not be
	// sent) is closed by Release, never handed out again.
	defer conn.Release()
	p := &pipeline{tx: conn}
	p.held.Hold("BEGIN")
	if plansGenerically(conn) {
		p.held.Hold(genericPlans) // plans.go
	}
	// Its savepoints are plain statements rather than pgx's nested
	// transactions, which release each savepoint in a round trip of its own,
	// held back, with the writes made through Later, to go in one batch with
	// the next statement.
	c := driver.HeldChangeTx{Queries: driver.Paused(queries{pgdb.New(p)}, e.pause), Deferred: queries{pgdb.New(later{p})}, Pipeline: p,
		HeldSavepoints: driver.HeldSavepoints{Held: &p.held, Exec: func(ctx context.Context, sql string) error {
			_, err := conn.Exec(ctx, sql)
			return err
		}, BeforeSavepoint: p.planAsTheServerChooses}}
	if err := fn(c); err != nil {
		p.rollback(ctx)
		return err
	}
	// A caller that gave up before the COMMIT is sent records nothing. Once
	// it is sent, its answer is awaited whatever becomes of ctx: cancelled
	// mid-COMMIT, pgx stops reading while the server may have committed, and
	// the caller would be told "not recorded" of a recorded change.
	if err := ctx.Err(); err != nil {
		p.rollback(ctx)
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	forget := e.local.ExpectEcho(driver.CommittedOf(ctx)) // its notification wakes nobody again (wakes)
	if _, err := p.Exec(cctx, "COMMIT"); err != nil {
		forget()
		p.rollback(ctx)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// commitTimeout bounds the wait for a COMMIT's answer once it is sent. Past
// it the outcome is unknown and the caller is told of an error: only a
// database that stopped answering gets there.
const commitTimeout = 10 * time.Second

// rollback ends the transaction, if it has begun on the server, whatever
// became of ctx.
func (p *pipeline) rollback(ctx context.Context) {
	if held := p.held.Take(); len(held) > 0 && (held[0].SQL == "BEGIN" || held[0].SQL == readBegin) {
		return // nothing reached the server
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = p.tx.Exec(rctx, "ROLLBACK")
}

// Flush sends what is held, in one batch.
func (p *pipeline) Flush(ctx context.Context) error {
	held := p.held.Take()
	if len(held) == 0 {
		return nil
	}
	br, err := p.send(ctx, held)
	if err != nil {
		return err
	}
	return br.Close()
}

// pipeline is a pgdb.DBTX on a change transaction that sends what is held
// (driver.Held) in one batch with its next statement: one round trip.
type pipeline struct {
	tx   conn
	held driver.Held
}

// conn is what a pipeline sends on: a pool's connection.
type conn interface {
	pgdb.DBTX
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// later is the pipeline's view for ChangeTx.Later: an Exec is held.
type later struct{ *pipeline }

func (l later) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	l.held.HoldCounted(driver.CountTo(ctx), sql, args...)
	return pgconn.CommandTag{}, nil
}

// QueryRow holds an insert whose row's id is wanted once it is sent
// (driver.IDInto), and sends any other query, after what is held, as the
// pipeline does.
func (l later) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if id := driver.IDTo(ctx); id != nil {
		l.held.HoldID(id, sql, args...)
		return heldRow{}
	}
	return l.pipeline.QueryRow(ctx, sql, args...)
}

// heldRow is a held insert's row: nothing yet, its id comes when it is sent.
type heldRow struct{}

func (heldRow) Scan(...any) error { return nil }

// send sends the statements held, then the ones given, in one batch, and
// reads the held ones' results (their counts to those that want them,
// driver.CountInto, an insert's id to its, driver.IDInto): the first error is
// theirs (the batch is then closed, and its later statements did not run);
// otherwise the batch is left at the first statement given, for the caller
// to read and close.
func (p *pipeline) send(ctx context.Context, held []driver.HeldStatement, then ...driver.HeldStatement) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	for _, s := range append(held, then...) {
		b.Queue(s.SQL, s.Args...)
	}
	br := p.tx.SendBatch(ctx, b)
	for _, s := range held {
		if s.ID != nil {
			if err := br.QueryRow().Scan(s.ID); err != nil {
				_ = br.Close()
				return nil, err
			}
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		if s.Rows != nil {
			*s.Rows += tag.RowsAffected()
		}
	}
	return br, nil
}

// sendWith sends sql after what is held, in one batch left at sql's results
// (see send); with nothing held it sends nothing and returns nil: the caller
// sends sql on its own, in a round trip no batch would save.
func (p *pipeline) sendWith(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	held := p.held.Take()
	if len(held) == 0 {
		return nil, nil
	}
	return p.send(ctx, held, driver.HeldStatement{SQL: sql, Args: args})
}

func (p *pipeline) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := p.sendWith(ctx, sql, args)
	switch {
	case err != nil:
		return pgconn.CommandTag{}, err
	case br == nil:
		return p.tx.Exec(ctx, sql, args...)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p *pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := p.sendWith(ctx, sql, args)
	switch {
	case err != nil:
		return nil, err
	case br == nil:
		return p.tx.Query(ctx, sql, args...)
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return batchRows{Rows: rows, br: br}, nil
}

func (p *pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := p.sendWith(ctx, sql, args)
	switch {
	case err != nil:
		return errRow{err}
	case br == nil:
		return p.tx.QueryRow(ctx, sql, args...)
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// batchRows are a batch's last statement's rows: closing them closes the
// batch, which frees the connection.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// batchRow is a batch's last statement's row: scanning it closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRow is a row that could not be read.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (e *Engine) Queries(context.Context) driver.Queries { return queries{e.q} }

// fabricLockKey is fabric's advisory lock key: lockKey for the default
// fabric (the key of a manager that knows no fabrics), a hash of the
// fabric's name for another.
func fabricLockKey(fabric string) int64 {
	if fabric == driver.DefaultFabric {
		return lockKey
	}
	h := fnv.New64a()
	h.Write([]byte("afm_applier/" + fabric))
	return int64(h.Sum64())
}

// TryLock takes fabric's advisory lock on a new connection that lives as long as the lock.
func (e *Engine) TryLock(ctx context.Context, fabric string) (driver.Lock, error) {
	key := fabricLockKey(fabric)
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return nil, fmt.Errorf("lock connection: %w", err)
	}
	// After a cut link the server would keep this session, and the lock, for
	// as long as TCP takes to notice (hours): no manager could lead again.
	// The holder checks the lock every second, so a session idle for
	// driver.LockSessionIdle has lost its client, and the server ends it.
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", driver.LockSessionIdle.Milliseconds())); err != nil {
		e.log.Warn("idle_session_timeout not set on the lock's session (PostgreSQL 14 or later has it): "+
			"after a network cut the lock stays held until the server notices the dead connection", "error", err)
	}
	ok, err := pgdb.New(conn).TryAdvisoryLock(ctx, key)
	if err != nil || !ok {
		conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("pg_try_advisory_lock: %w", err)
		}
		return nil, nil
	}
	return &advisoryLock{conn: conn, key: key}, nil
}

type advisoryLock struct {
	conn *pgx.Conn
	key  int64
}

// Check asks, on the lock's own session, whether that session still holds it.
func (l *advisoryLock) Check(ctx context.Context) error {
	return driver.StillHeld(pgdb.New(l.conn).HoldsAdvisoryLock(ctx, l.key))
}

func (l *advisoryLock) Release(ctx context.Context) error {
	// Unlocked first: the server releases a closed session's locks only once
	// its backend has exited, after Close returned, so a TryLock right after
	// (the next term) could still find it held. Closing the session releases
	// the lock whatever state it is in, if the unlock could not.
	_, _ = pgdb.New(l.conn).AdvisoryUnlock(ctx, l.key)
	return l.conn.Close(ctx)
}

// Wake LISTENs on a dedicated connection, reconnecting with backoff, until
// ctx ends; it receives after any fabric's revision changed, and at once
// after this process's own changes (LocalWake).
func (e *Engine) Wake(ctx context.Context) <-chan struct{} { return e.WakeFabric(ctx, "") }

// TakeCommitted is the newest revision of fabric this process committed
// since it was last asked (driver.LocalWake.TakeCommitted).
func (e *Engine) TakeCommitted(fabric string) (int64, bool) { return e.local.TakeCommitted(fabric) }

// WakeFabric is Wake for fabric's revision only ("": any fabric's): the
// notification's payload is "<fabric>:<revision>" (migration 00013), so a
// burst on one fabric does not wake another's applier.
func (e *Engine) WakeFabric(ctx context.Context, fabric string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	e.local.WakeInto(ctx, fabric, ch)
	go func() {
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := e.listen(ctx, fabric, ch)
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

func (e *Engine) listen(ctx context.Context, fabric string, ch chan<- struct{}) error {
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
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if e.wakes(n.Payload, fabric) {
				signal(ch)
			}
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

//go:generate go run ../driver/adaptergen

// queries are the generated ones, with their rows converted to the driver's
// types, which have the same fields, by adaptergen (adapters_gen.go).
// lease.go holds what differs.
type queries struct{ *pgdb.Queries }

// InsertJobWithPlaces is InsertJob with the places in its row
// (queries/postgres), whose job adaptergen does not spread into its
// arguments beside them.
func (q queries) InsertJobWithPlaces(ctx context.Context, j driver.Job, places []driver.Place) (int64, error) {
	return q.Queries.InsertJobWithPlaces(ctx, j.Fabric, j.Revision, j.ObjectType, j.ObjectID, j.NetworkID, j.Operation, j.Status,
		j.Description, j.Result, j.Error, j.CreatedBy, j.Request, j.RequestID, j.CreatedAt, j.UpdatedAt, j.StartedAt, j.FinishedAt,
		driver.PlacesJSON(places))
}

var _ driver.Driver = (*Engine)(nil)

// wakes says whether a revision notification's payload wakes a waiter for
// fabric ("": any): one of its fabric that is not the echo of this
// process's own commit, whose waiters were woken at its COMMIT's answer
// (driver.LocalWake.Echo).
func (e *Engine) wakes(payload, fabric string) bool {
	if !forFabric(payload, fabric) {
		return false
	}
	name, text, ok := strings.Cut(payload, ":")
	revision, err := strconv.ParseInt(text, 10, 64)
	return !ok || err != nil || !e.local.Echo(name, revision)
}

// forFabric says whether a revision notification's payload concerns fabric
// ("": any). A payload that names no fabric wakes every waiter.
func forFabric(payload, fabric string) bool {
	name, _, ok := strings.Cut(payload, ":")
	return fabric == "" || !ok || name == fabric
}

// DropLegacyKeys drops migration 00013's unique indexes on the keys of before
// fabrics (driver.LegacyKeyIndexes), once the database serves several.
func (e *Engine) DropLegacyKeys(ctx context.Context) error {
	for _, name := range driver.LegacyKeyIndexes {
		if _, err := e.pool.Exec(ctx, "DROP INDEX IF EXISTS "+name); err != nil {
			return fmt.Errorf("drop index %s: %w", name, err)
		}
	}
	return nil
}
