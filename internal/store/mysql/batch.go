package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// ReadBatch is driver.BatchReader: on a pipelined connection, the
// transaction's beginning (as InTx's ReadOnly: a consistent snapshot, no
// lock), each read's query and the COMMIT go in one multi-statement query,
// one round trip. The server runs them in turn, in one transaction, and
// answers with one result set a query; each read's query is then answered
// with its own, as if sent alone. On Galera (not pipelined) the reads run
// through InTx, one query after the other.
func (e *Engine) ReadBatch(ctx context.Context, reads ...func(q driver.Queries) error) error {
	if !e.pipelined {
		return e.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
			for _, read := range reads {
				if err := read(q); err != nil {
					return err
				}
			}
			return nil
		})
	}
	held := make([]driver.HeldStatement, 0, len(readBegin)+len(reads))
	for _, sql := range readBegin {
		held = append(held, driver.HeldStatement{SQL: sql})
	}
	queried := make([]string, len(reads))
	for i, read := range reads {
		rec := &recorder{}
		err := read(newQueries(rec))
		if len(rec.stmts) != 1 || !errors.Is(err, driver.ErrBatchQueried) {
			return fmt.Errorf("batched read %d made %d queries, not one (%v)", i, len(rec.stmts), err)
		}
		queried[i] = rec.stmts[0].SQL
		held = append(held, rec.stmts[0])
	}
	sets, err := e.sendBatch(ctx, held, len(reads))
	if err != nil {
		return err
	}
	for i, read := range reads {
		r := &replay{set: &sets[i], want: queried[i]}
		if err := read(newQueries(r)); err != nil {
			return err
		}
		if !r.done {
			return fmt.Errorf("batched read %d did not read its query's answer", i)
		}
	}
	return nil
}

// sendBatch sends held and a COMMIT as one query and reads its result sets,
// n of them, whole: the transaction has ended when it returns.
func (e *Engine) sendBatch(ctx context.Context, held []driver.HeldStatement, n int) ([]resultSet, error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	p := &pipeline{tx: conn}
	query, args := joined(held, driver.HeldStatement{SQL: "COMMIT"})
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		// The server stops at a statement it refuses: the transaction
		// may be open, its COMMIT unrun.
		p.rollback(ctx, conn)
		return nil, err
	}
	sets, err := readSets(rows, n)
	if err != nil {
		p.rollback(ctx, conn)
		return nil, err
	}
	return sets, nil
}

// readSets reads n result sets of rows, whole, and closes rows.
func readSets(rows *sql.Rows, n int) ([]resultSet, error) {
	defer rows.Close()
	sets := make([]resultSet, 0, n)
	for {
		set, err := readSet(rows)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(sets) != n {
		return nil, fmt.Errorf("a batch of %d queries answered %d result sets", n, len(sets))
	}
	return sets, nil
}

// readSet reads the current result set of rows, whole.
func readSet(rows *sql.Rows) (resultSet, error) {
	cols, err := rows.Columns()
	if err != nil {
		return resultSet{}, err
	}
	set := resultSet{columns: cols}
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i] // a copy of each value: the driver reuses its buffer
		}
		if err := rows.Scan(ptrs...); err != nil {
			return resultSet{}, err
		}
		set.rows = append(set.rows, row)
	}
	return set, rows.Err()
}

// resultSet is one query's answer, read whole.
type resultSet struct {
	columns []string
	rows    [][]any
}

// answers is a database/sql database whose connections answer a query with
// the result set its context carries (answerKey), or with its error: what
// lets sqlc's code, which reads *sql.Rows and *sql.Row, read a result set of
// a batch as it reads a query's own. It never connects anywhere, and is
// opened at its first use.
var answers = sync.OnceValue(func() *sql.DB { return sql.OpenDB(answerConnector{}) })

type answerKey struct{}

// answer is what a query through answers is answered with.
type answer struct {
	set *resultSet
	err error
}

type answerConnector struct{}

func (answerConnector) Connect(context.Context) (sqldriver.Conn, error) { return answerConn{}, nil }
func (answerConnector) Driver() sqldriver.Driver                        { return answerDriver{} }

type answerDriver struct{}

func (answerDriver) Open(string) (sqldriver.Conn, error) { return answerConn{}, nil }

type answerConn struct{}

func (answerConn) Prepare(string) (sqldriver.Stmt, error) {
	return nil, errors.New("a batched read's answer cannot be prepared")
}
func (answerConn) Close() error { return nil }
func (answerConn) Begin() (sqldriver.Tx, error) {
	return nil, errors.New("a batched read's answer has no transaction")
}

func (answerConn) QueryContext(ctx context.Context, _ string, _ []sqldriver.NamedValue) (sqldriver.Rows, error) {
	a, ok := ctx.Value(answerKey{}).(answer)
	switch {
	case !ok:
		return nil, errors.New("no batched answer")
	case a.err != nil:
		return nil, a.err
	}
	return &answerRows{set: a.set}, nil
}

// answerRows are a result set's rows, from the first.
type answerRows struct {
	set  *resultSet
	next int
}

func (r *answerRows) Columns() []string { return r.set.columns }
func (r *answerRows) Close() error      { return nil }
func (r *answerRows) Next(dest []sqldriver.Value) error {
	if r.next >= len(r.set.rows) {
		return io.EOF
	}
	for i, v := range r.set.rows[r.next] {
		dest[i] = v
	}
	r.next++
	return nil
}

// recorder is a mysqldb.DBTX that takes each statement down and answers
// driver.ErrBatchQueried.
type recorder struct{ stmts []driver.HeldStatement }

func (r *recorder) take(sql string, args []any) {
	r.stmts = append(r.stmts, driver.HeldStatement{SQL: sql, Args: args})
}

func (r *recorder) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	r.take(query, args)
	return nil, driver.ErrBatchQueried
}

func (r *recorder) PrepareContext(_ context.Context, query string) (*sql.Stmt, error) {
	r.take(query, nil)
	return nil, driver.ErrBatchQueried
}

func (r *recorder) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	r.take(query, args)
	return nil, driver.ErrBatchQueried
}

func (r *recorder) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.take(query, args)
	return answers().QueryRowContext(context.WithValue(ctx, answerKey{}, answer{err: driver.ErrBatchQueried}), query)
}

// replay is a mysqldb.DBTX that answers one read's one query with its result
// set: the statement the read made when its query was taken down, and only
// once.
type replay struct {
	set  *resultSet
	want string
	done bool
}

// answer is the context that answers the statement query, if it is the one
// the batch holds.
func (r *replay) answer(ctx context.Context, query string) context.Context {
	a := answer{set: r.set}
	if r.done || query != r.want {
		a = answer{err: errors.New("a batched read made a query other than the one it was batched with")}
	}
	r.done = true
	return context.WithValue(ctx, answerKey{}, a)
}

func (r *replay) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("a batched read made a write")
}

func (r *replay) PrepareContext(context.Context, string) (*sql.Stmt, error) {
	return nil, errors.New("a batched read prepared a statement")
}

func (r *replay) QueryContext(ctx context.Context, query string, _ ...any) (*sql.Rows, error) {
	return answers().QueryContext(r.answer(ctx, query), query)
}

func (r *replay) QueryRowContext(ctx context.Context, query string, _ ...any) *sql.Row {
	return answers().QueryRowContext(r.answer(ctx, query), query)
}

var _ driver.BatchReader = (*Engine)(nil)
