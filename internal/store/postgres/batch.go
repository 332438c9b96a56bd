package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// ReadBatch is driver.BatchReader: the transaction's BEGIN (as InTx's
// ReadOnly: one consistent state, no lock), each read's query and the COMMIT
// go in one pgx batch, one round trip on a connection that has prepared
// them before. Every statement of the batch runs on the server in turn
// whatever the client does meanwhile, in one REPEATABLE READ snapshot: the
// reads see the state of one moment, as they do through InTx.
func (e *Engine) ReadBatch(ctx context.Context, reads ...func(q driver.Queries) error) error {
	b := &pgx.Batch{}
	b.Queue(readBegin)
	queried := make([]driver.HeldStatement, len(reads))
	for i, read := range reads {
		rec := &recorder{}
		err := read(queries{pgdb.New(rec)})
		if len(rec.stmts) != 1 || !errors.Is(err, driver.ErrBatchQueried) {
			return fmt.Errorf("batched read %d made %d queries, not one (%v)", i, len(rec.stmts), err)
		}
		queried[i] = rec.stmts[0]
		b.Queue(queried[i].SQL, queried[i].Args...)
	}
	b.Queue("COMMIT")
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection still inside a transaction (its ROLLBACK could not be
	// sent) is closed by Release, never handed out again.
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	err = answer(br, queried, reads)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A statement that failed left the transaction aborted on the
		// server and the rest of the batch, its COMMIT too, unrun.
		(&pipeline{tx: conn}).rollback(ctx)
		return err
	}
	return nil
}

// answer reads the batch's results: the BEGIN's, each read's with its query
// answered from the batch, then the COMMIT's.
func answer(br pgx.BatchResults, queried []driver.HeldStatement, reads []func(q driver.Queries) error) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for i, read := range reads {
		r := &replay{br: br, want: queried[i].SQL}
		if err := read(queries{pgdb.New(r)}); err != nil {
			return err
		}
		if !r.done {
			return fmt.Errorf("batched read %d did not read its query's answer", i)
		}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// recorder is a pgdb.DBTX that takes each statement down and answers
// driver.ErrBatchQueried.
type recorder struct{ stmts []driver.HeldStatement }

func (r *recorder) take(sql string, args []any) {
	r.stmts = append(r.stmts, driver.HeldStatement{SQL: sql, Args: args})
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.take(sql, args)
	return pgconn.CommandTag{}, driver.ErrBatchQueried
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.take(sql, args)
	return nil, driver.ErrBatchQueried
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.take(sql, args)
	return errRow{driver.ErrBatchQueried}
}

// replay is a pgdb.DBTX that answers one read's one query from the batch:
// the statement the read made when its query was taken down, and only once.
type replay struct {
	br   pgx.BatchResults
	want string
	done bool
}

// check refuses a statement the batch does not hold next.
func (r *replay) check(sql string) error {
	if r.done || sql != r.want {
		return errors.New("a batched read made a query other than the one it was batched with")
	}
	r.done = true
	return nil
}

func (r *replay) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	if err := r.check(sql); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.br.Exec()
}

func (r *replay) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	if err := r.check(sql); err != nil {
		return nil, err
	}
	return r.br.Query()
}

func (r *replay) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	if err := r.check(sql); err != nil {
		return errRow{err}
	}
	return r.br.QueryRow()
}

var _ driver.BatchReader = (*Engine)(nil)
