package mysql

import (
	"context"
	"database/sql"
	"errors"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
)

// wholeReads is the mysqldb.DBTX of a write transaction run through
// database/sql (every one on Galera, and the writes that are not changes
// elsewhere): each query's result set is read whole before sqlc's code scans
// it, so that a query the server cut off answers with the server's error. A
// read-only transaction holds no lock and writes nothing, so no replicated
// write aborts it; its reads, the snapshot's among them, go as they went.
//
// Galera aborts a local transaction whose locks a write replicated from
// another node needs (a brute-force abort), at any moment: a change's
// transaction holds the revision's row from its first statement, so two
// changes through two nodes at once make one of them the victim. Cut off
// while it was sending a row, the server sends that row with NULL where a
// scalar subquery was being evaluated (GetPortChangeRows' count of adopted
// partitions, or its revision), then error 1213 where the end of the result
// set was due. Read row by row, sqlc's Scan of the NULL failed first
// ("converting NULL to int64"), the 1213 behind it was never read, and the
// change was answered 500 where it should have been run again
// (store.IsConflict). Read whole, the query fails with the 1213 itself.
type wholeReads struct{ mysqldb.DBTX }

func (w wholeReads) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return answers().QueryContext(w.read(ctx, query, args), query)
}

func (w wholeReads) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return answers().QueryRowContext(w.read(ctx, query, args), query)
}

// read runs query and reads its one result set whole; the context it returns
// answers the query through answers with that set, or with the error that
// ended it.
func (w wholeReads) read(ctx context.Context, query string, args []any) context.Context {
	rows, err := w.DBTX.QueryContext(ctx, query, args...)
	if err != nil {
		return context.WithValue(ctx, answerKey{}, answer{err: err})
	}
	set, err := readSet(rows)
	// Close reads what is left of the answer, as sqlc's code would have.
	err = errors.Join(err, rows.Close())
	if err != nil {
		return context.WithValue(ctx, answerKey{}, answer{err: err})
	}
	return context.WithValue(ctx, answerKey{}, answer{set: &set})
}
