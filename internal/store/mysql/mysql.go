// Package mysql is the MariaDB (and MySQL) engine of the store, on
// go-sql-driver/mysql.
//
// The applier lock is GET_LOCK on a connection of its own. Galera does not
// replicate GET_LOCK, so on a node with wsrep_on the lock is refused
// (driver.ErrLockNotClusterWide): two managers on two nodes would both apply.
// With [ha] ha = true the lease (package store, over lease.go's queries)
// elects instead, on Galera too. There is no LISTEN: the applier polls the
// revision every [database] poll_interval.
package mysql

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"

	"github.com/go-sql-driver/mysql"
)

// applierLock names the applier lock of database db. GET_LOCK's names are the
// server's, not a database's: the name holds the database's, so that managers
// of two databases on one server do not exclude each other. A name is at most
// 64 characters; a long database name is hashed.
func applierLock(db string) string {
	const prefix = "afm-applier/"
	if len(prefix)+len(db) > 64 {
		sum := sha256.Sum256([]byte(db))
		return prefix + hex.EncodeToString(sum[:])[:64-len(prefix)]
	}
	return prefix + db
}

// Engine is the MariaDB driver.Driver.
type Engine struct {
	db       *sql.DB
	q        *mysqldb.Queries
	log      *slog.Logger
	lockName string // applierLock of dbName: the default fabric's
	dbName   string
	// pipelined: change transactions hold statements back (driver.HeldChangeTx).
	pipelined bool
	// pause is a test hook's (driver.PauseInsideFinish); nil in production.
	pause func(ctx context.Context)

	// MariaDB has no LISTEN: Wake fires after the changes this process
	// commits; other replicas' changes are found by polling.
	driver.LocalWake
}

// Open connects with a go-sql-driver DSN (user:pass@tcp(host:port)/db?...).
func Open(ctx context.Context, dsn string, log *slog.Logger, opts ...driver.Option) (*Engine, error) {
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
	// A change transaction sends the statements it holds back in one query
	// with its next one (driver.HeldChangeTx): several statements in one query, which
	// the server only runs with multiStatements, and only with interpolated
	// arguments (a prepared statement is one statement). The queries are
	// sqlc's constants and the savepoint's, never built from a request, and
	// their arguments are escaped as above. A DSN that sets multiStatements
	// itself is obeyed: false sends each statement on its own.
	pipelined := pipelineByDefault(dsn, cfg)
	if pipelined {
		cfg.MultiStatements = true
	}
	// The driver's own complaints (a dead idle connection dropped, a packet
	// cut short) go through the manager's log, in its format, rather than
	// as bare lines on stderr.
	cfg.Logger = driverLog{log}
	db, isGalera, err := openForServer(ctx, cfg, driver.OptionsOf(opts...), log)
	if err != nil {
		return nil, err
	}
	if isGalera {
		// Galera aborts a local transaction that conflicts with a write
		// replicated from another node (a brute-force abort) at any moment.
		// One that lands between two statements of a multi-statement query
		// ends the transaction there, and the query's later statements run
		// on outside it, each committed on its own, with no error for the
		// client: a job would be recorded without its change, at a revision
		// another change has. Sent one by one, the first statement after the
		// abort is refused with the deadlock error, and the store runs the
		// change again.
		pipelined = false
	}
	q := mysqldb.New(db)
	return &Engine{db: db, q: q, log: log, lockName: applierLock(cfg.DBName), dbName: cfg.DBName, pipelined: pipelined,
		pause: driver.PauseInsideFinish(log)}, nil
}

// openForServer opens the pool with the session variables the server calls
// for, beyond the DSN's: they depend on the server, so it is opened, asked,
// and opened again with them (once: a manager opens its store at start-up).
// It says whether the server is a Galera node.
func openForServer(ctx context.Context, cfg *mysql.Config, opts driver.Options, log *slog.Logger) (*sql.DB, bool, error) {
	db, err := openPool(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	added := idleTransaction(ctx, db, cfg, opts.IdleTransaction, log)
	isGalera := galera(ctx, mysqldb.New(db))
	// A Galera node applies the other nodes' commits a moment after they
	// are certified: without causal reads a change through this node right
	// after one through another would be judged by the state before it (a
	// port just recorded elsewhere "not found" by its DELETE, which
	// networking-mlnx takes for removed), and a job just recorded elsewhere
	// would answer 404. wsrep_sync_wait = 3 makes every read, UPDATE and
	// DELETE wait until the node has applied what the cluster committed
	// before it. A DSN that sets it is obeyed.
	if _, set := cfg.Params["wsrep_sync_wait"]; isGalera && !set {
		added["wsrep_sync_wait"] = "3"
	}
	if len(added) == 0 {
		return db, isGalera, nil
	}
	db.Close()
	for name, value := range added {
		cfg.Params[name] = value
	}
	db, err = openPool(ctx, cfg)
	return db, isGalera, err
}

// openPool opens the connection pool and checks that it connects.
func openPool(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
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
	return db, nil
}

// idleTransaction returns the session variable that has the server end a
// session idle inside a transaction for longer than idle
// (driver.Options.IdleTransaction, in whole seconds), unless the DSN (cfg)
// sets it: a session whose client was cut off in the middle of a fenced
// write keeps a shared lock on the lease's row, and every other manager's
// take of the lease waits on it until wait_timeout (8 hours by default).
// On Galera, a take through another node aborts that transaction when it
// replicates, but one through the same node waits like any other. MariaDB
// (10.3 and later) has idle_transaction_timeout; MySQL has no such variable,
// and is left as it is, with a warning.
func idleTransaction(ctx context.Context, db *sql.DB, cfg *mysql.Config, idle time.Duration, log *slog.Logger) map[string]string {
	const name = "idle_transaction_timeout"
	if _, set := cfg.Params[name]; set || idle <= 0 {
		return map[string]string{}
	}
	var current int64
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION."+name).Scan(&current); err != nil {
		log.Warn("the server has no "+name+" (MariaDB 10.3 or later has it): a session cut off inside a transaction "+
			"keeps its locks, the lease's row among them, until the server's wait_timeout", "error", err)
		return map[string]string{}
	}
	seconds := int64((idle + time.Second - 1) / time.Second)
	if current > 0 && current <= seconds {
		return map[string]string{} // the server's own is as short
	}
	return map[string]string{name: fmt.Sprint(seconds)}
}

// galera says whether the server is a Galera node (wsrep_on; servers without
// Galera support have no @@wsrep_on at all).
func galera(ctx context.Context, q *mysqldb.Queries) bool {
	on, err := q.WsrepOn(ctx)
	return err == nil && on != 0
}

// driverLog is the driver's mysql.Logger on the manager's log.
type driverLog struct{ log *slog.Logger }

func (l driverLog) Print(v ...any) {
	l.log.Warn("mysql driver: " + strings.TrimSpace(fmt.Sprint(v...)))
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
	params, err := dsnParams(dsn)
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

// dsnParams are a DSN's parameters, as the driver reads them: they follow the
// last '/' (a password may hold a '?' or a '/').
func dsnParams(dsn string) (url.Values, error) {
	_, query, _ := strings.Cut(dsn[strings.LastIndex(dsn, "/")+1:], "?")
	return url.ParseQuery(query)
}

// pipelineByDefault says whether change transactions send the statements
// they hold back in one query with the next (see Open): arguments are
// interpolated, and the DSN (cfg as read from it) sets multiStatements true
// or not at all.
func pipelineByDefault(dsn string, cfg *mysql.Config) bool {
	params, err := dsnParams(dsn)
	return err == nil && cfg.InterpolateParams && (cfg.MultiStatements || !params.Has("multiStatements"))
}

func (e *Engine) Name() string { return "mysql" }

func (e *Engine) Close() error { return e.db.Close() }

// Migrate applies the embedded migrations under goose's table locker.
func (e *Engine) Migrate(ctx context.Context) error {
	locker, err := lock.NewMySQLTableLocker()
	if err != nil {
		return err
	}
	return e.migrations(goose.WithLocker(locker)).Up(ctx)
}

func (e *Engine) Schema(ctx context.Context) (driver.SchemaVersions, error) {
	return e.migrations(nil).Schema(ctx)
}

func (e *Engine) migrations(locker goose.ProviderOption) driver.Migrations {
	return driver.Migrations{Engine: "mysql", Dialect: goose.DialectMySQL, DB: e.db, Locker: locker}
}

// InTx runs fn in one transaction: InnoDB's default REPEATABLE READ for
// writes (a change's first statement, the revision's UPDATE, takes the row lock
// before the read view is taken at its first plain read), and a consistent
// read-only snapshot for ReadOnly.
func (e *Engine) InTx(ctx context.Context, mode driver.TxMode, fn func(q driver.Queries) error) error {
	var opts *sql.TxOptions
	if mode == driver.ReadOnly {
		if e.pipelined {
			return e.inReadTx(ctx, fn)
		}
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	return driver.InSQLTx(ctx, e.db, opts, func(tx *sql.Tx) error {
		if mode == driver.ReadOnly {
			return fn(newQueries(tx)) // it holds no lock: no write aborts it (wholeReads)
		}
		return fn(newQueries(wholeReads{tx}))
	})
}

// readBegin begins a read-only transaction as database/sql's BeginTx does,
// each statement of it a round trip of its own there.
var readBegin = []string{"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION READ ONLY"}

// inReadTx is InTx's read-only transaction on a pipelined connection: its
// beginning is held to go with its first query, in one round trip (as
// inHeldTx's), so that every read of the API and of the applier's snapshot
// is two round trips shorter. A transaction that ran no query never began.
// On Galera (not pipelined) a read gains nothing from it: database/sql's
// transaction is kept there.
func (e *Engine) inReadTx(ctx context.Context, fn func(q driver.Queries) error) error {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	p := &pipeline{tx: conn}
	for _, sql := range readBegin {
		p.held.Hold(sql)
	}
	if err := fn(newQueries(p)); err != nil {
		p.rollback(ctx, conn)
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			return fmt.Errorf("%w: %w", cerr, err) // as inHeldTx says it
		}
		return err
	}
	if len(p.held.Take()) > 0 {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		p.rollback(ctx, conn)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// InChangeTx runs fn in one transaction, as a Write, and wakes this process's
// waiters after it commits (with the revision fn set, if any:
// driver.WithCommitted).
func (e *Engine) InChangeTx(ctx context.Context, fn func(tx driver.ChangeTx) error) error {
	var err error
	if e.pipelined {
		err = e.inHeldTx(ctx, fn)
	} else {
		// The connection cannot send several statements in one query
		// (see pipelined): each goes on its own.
		err = driver.InSQLTx(ctx, e.db, nil, func(tx *sql.Tx) error {
			return fn(driver.PlainChangeTx{Queries: driver.Paused(newQueries(wholeReads{tx}), e.pause),
				SQLSavepoints: driver.SQLSavepoints{Tx: tx}})
		})
	}
	if err == nil {
		e.NotifyCommitted(driver.CommittedOf(ctx))
	}
	return err
}

// inHeldTx is InChangeTx on a pipelined connection. The transaction is begun
// and committed with plain statements, held like the others: START
// TRANSACTION goes with the first statement (a change's revision UPDATE,
// which still takes the row lock before any read view), and COMMIT with
// whatever fn left held, so that neither costs a round trip of its own (the
// savepoints, and the writes made through Later, go with the next statement
// as before).
func (e *Engine) inHeldTx(ctx context.Context, fn func(tx driver.ChangeTx) error) error {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	p := &pipeline{tx: conn}
	p.held.Hold("START TRANSACTION")
	c := driver.HeldChangeTx{Queries: driver.Paused(newQueries(p), e.pause), Deferred: newQueries(later{p}), Pipeline: p,
		HeldSavepoints: driver.HeldSavepoints{Held: &p.held, Exec: func(ctx context.Context, sql string) error {
			_, err := conn.ExecContext(ctx, sql)
			return err
		}}}
	if err := fn(c); err != nil {
		p.rollback(ctx, conn)
		if p.failed != nil {
			err = fmt.Errorf("%w (%w)", p.failed, err)
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// The driver ends a statement that ctx cut short by closing its
			// connection ("bad connection"): the cause is the caller's, as
			// a database/sql transaction says.
			return fmt.Errorf("%w: %w", cerr, err)
		}
		return err
	}
	// A caller that gave up before the COMMIT is sent records nothing; once
	// it is sent, its answer is awaited whatever becomes of ctx (as
	// database/sql's Commit does), within commitTimeout.
	if err := ctx.Err(); err != nil {
		p.rollback(ctx, conn)
		return err
	}
	if p.failed != nil {
		// A held write failed (MariaDB undid that statement alone): even a
		// caller that went on never commits the others.
		p.rollback(ctx, conn)
		return p.failed
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if _, err := p.exec(cctx, p.held.Take(), driver.HeldStatement{SQL: "COMMIT"}); err != nil {
		p.rollback(ctx, conn)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// commitTimeout bounds the wait for a COMMIT's answer once it is sent. Past
// it the outcome is unknown and the caller is told of an error: only a
// database that stopped answering gets there.
const commitTimeout = 10 * time.Second

// rollback ends the transaction, if it has begun on the server, whatever
// became of ctx; a connection whose ROLLBACK could not be sent is discarded,
// never handed out again inside a transaction.
func (p *pipeline) rollback(ctx context.Context, conn *sql.Conn) {
	if held := p.held.Take(); len(held) > 0 && (held[0].SQL == "START TRANSACTION" || held[0].SQL == readBegin[0]) {
		return // nothing reached the server
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(rctx, "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
}

// pipeline is a mysqldb.DBTX on a change transaction that sends what is held
// (driver.Held) in one query with its next statement: the server runs them in
// turn and stops at the first error, which the driver returns; a query's rows
// are its last statement's (the driver skips the results that have none),
// and an insert's id is its last statement's.
type pipeline struct {
	tx   *sql.Conn // inside the transaction it began (inHeldTx)
	held driver.Held
	// failed is the error of held statements sent before a QueryRowContext,
	// whose Row cannot carry it.
	failed error
}

// later is the pipeline's view for ChangeTx.Later: an exec is held.
type later struct{ *pipeline }

func (l later) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if id := driver.IDTo(ctx); id != nil {
		// Its insert id is given to id when it is sent (driver.IDInto).
		l.held.HoldID(id, query, args...)
		return insertedResult{}, nil
	}
	if rows := driver.CountTo(ctx); rows != nil {
		// Its count is added to rows when it is sent (driver.CountInto).
		l.held.HoldCounted(rows, query, args...)
		return countedResult{}, nil
	}
	l.held.Hold(query, args...)
	return heldResult{}, nil
}

// countedResult is what a held exec whose count is wanted returns: no rows
// yet, the count to come (driver.CountInto).
type countedResult struct{}

func (countedResult) LastInsertId() (int64, error) {
	return 0, errors.New("a held statement has no insert id")
}

func (countedResult) RowsAffected() (int64, error) { return 0, nil }

// insertedResult is what a held insert whose id is wanted returns: no id
// yet, the id to come (driver.IDInto).
type insertedResult struct{}

func (insertedResult) LastInsertId() (int64, error) { return 0, nil }

func (insertedResult) RowsAffected() (int64, error) {
	return 0, errors.New("a held statement has no row count")
}

// heldResult is what a held exec returns: nothing yet.
type heldResult struct{}

func (heldResult) LastInsertId() (int64, error) {
	return 0, errors.New("a held statement has no insert id")
}

func (heldResult) RowsAffected() (int64, error) {
	return 0, errors.New("a held statement has no row count")
}

// joined is the statements held then the one given, as one multi-statement
// query and its arguments (placeholders are positional). A zero then adds
// nothing.
func joined(held []driver.HeldStatement, then driver.HeldStatement) (string, []any) {
	// Sized at once, not grown by doubling (a copy at each), while the
	// change holds its locks.
	size, nargs := len(then.SQL), len(then.Args)
	for _, s := range held {
		size += len(s.SQL) + len(";\n")
		nargs += len(s.Args)
	}
	var query strings.Builder
	query.Grow(size)
	args := make([]any, 0, nargs)
	for i := 0; i <= len(held); i++ {
		s := then
		if i < len(held) {
			s = held[i]
		}
		if s.SQL == "" {
			continue
		}
		if query.Len() > 0 {
			query.WriteString(";\n")
		}
		query.WriteString(s.SQL)
		args = append(args, s.Args...)
	}
	return query.String(), args
}

func (p *pipeline) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.exec(ctx, p.held.Take(), driver.HeldStatement{SQL: query, Args: args})
}

// exec sends held, then then, in one multi-statement exec. The count of
// each held statement that wants it (driver.CountInto) is added to it, and
// the insert id of each that wants it (driver.IDInto) given to it: the
// driver gives every statement's count and insert id (mysql.Result) to an
// exec on the driver's connection, where database/sql's Result has the
// last alone.
func (p *pipeline) exec(ctx context.Context, held []driver.HeldStatement, then driver.HeldStatement) (sql.Result, error) {
	query, args := joined(held, then)
	if !slices.ContainsFunc(held, answered) {
		return p.tx.ExecContext(ctx, query, args...)
	}
	var res sqldriver.Result
	err := p.tx.Raw(func(dc any) error {
		var err error
		res, err = rawExec(ctx, dc, query, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	all, ok := res.(mysql.Result)
	if !ok {
		return nil, fmt.Errorf("the driver's result %T gives no count of each statement", res)
	}
	counts, ids := all.AllRowsAffected(), all.AllLastInsertIds()
	if len(counts) < len(held) || len(ids) < len(held) {
		return nil, fmt.Errorf("%d statements sent, %d counts of rows, %d insert ids", len(held), len(counts), len(ids))
	}
	for i, s := range held {
		if s.Rows != nil {
			*s.Rows += counts[i]
		}
		if s.ID != nil {
			*s.ID = ids[i]
		}
	}
	return res, nil
}

// answered says whether a held statement wants its count (driver.CountInto)
// or its insert id (driver.IDInto) when it is sent.
func answered(s driver.HeldStatement) bool { return s.Rows != nil || s.ID != nil }

// rawExec is ExecContext on the driver's connection dc, its arguments
// converted as database/sql converts them (the driver's CheckNamedValue).
func rawExec(ctx context.Context, dc any, query string, args []any) (sqldriver.Result, error) {
	ex, ok := dc.(sqldriver.ExecerContext)
	if !ok {
		return nil, fmt.Errorf("the driver's connection %T cannot exec", dc)
	}
	values := make([]sqldriver.NamedValue, len(args))
	for i, a := range args {
		values[i] = sqldriver.NamedValue{Ordinal: i + 1, Value: a}
		if c, ok := dc.(sqldriver.NamedValueChecker); ok {
			if err := c.CheckNamedValue(&values[i]); err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
	}
	return ex.ExecContext(ctx, query, values)
}

// heldCounted says whether a held statement wants its count: then a query
// goes through queryCounted, since a query's rows are its last statement's
// and the driver gives no count of the statements before it.
func (p *pipeline) heldCounted() bool {
	return slices.ContainsFunc(p.held.Peek(), func(s driver.HeldStatement) bool { return s.Rows != nil })
}

// rowCount reads the count of the statement before it: the value MariaDB
// sends as that statement's affected rows (an UPDATE's too, found or changed
// as the connection asked).
const rowCount = "SELECT ROW_COUNT()"

// queryCounted sends what is held and query in one multi-statement query,
// each held statement that wants its count followed by rowCount, and
// answers query with its result set, read whole (batch.go's answers): one
// round trip where sending the held statements alone cost one more. The
// server runs them in turn and stops at the first error: an error before
// every count was read is a held write's, the transaction's (failed, as a
// Row cannot carry it to a caller that goes on); one after is query's own.
func (p *pipeline) queryCounted(ctx context.Context, query string, args []any) answer {
	held := p.held.Take()
	stmts := make([]driver.HeldStatement, 0, 2*len(held))
	var counts []*int64
	for _, s := range held {
		stmts = append(stmts, driver.HeldStatement{SQL: s.SQL, Args: s.Args})
		if s.Rows != nil {
			stmts, counts = append(stmts, driver.HeldStatement{SQL: rowCount}), append(counts, s.Rows)
		}
	}
	q, qargs := joined(stmts, driver.HeldStatement{SQL: query, Args: args})
	rows, err := p.tx.QueryContext(ctx, q, qargs...)
	if err != nil {
		p.failed = err
		return answer{err: err}
	}
	defer rows.Close()
	if err := readCounts(rows, counts); err != nil {
		p.failed = err
		return answer{err: err}
	}
	if !rows.NextResultSet() {
		return answer{err: cmp.Or(rows.Err(), errors.New("the query after the counted writes gave no rows"))}
	}
	set, err := readSet(rows)
	if err != nil {
		return answer{err: err}
	}
	return answer{set: &set}
}

// readCounts reads rowCount's answers, one result set each from the current
// one, and adds each to its count.
func readCounts(rows *sql.Rows, counts []*int64) error {
	for i, n := range counts {
		if i > 0 && !rows.NextResultSet() {
			return cmp.Or(rows.Err(), fmt.Errorf("%d counted writes sent, %d counts of rows", len(counts), i))
		}
		if !rows.Next() {
			return cmp.Or(rows.Err(), fmt.Errorf("the count of counted write %d has no row", i+1))
		}
		var c int64
		if err := rows.Scan(&c); err != nil {
			return fmt.Errorf("the count of counted write %d: %w", i+1, err)
		}
		*n += c
	}
	return nil
}

// heldInsert says whether a held insert wants its id (driver.IDInto): a
// query's rows are its last statement's, and LAST_INSERT_ID() gives no id the
// insert set itself (a job's), so what is held is sent on its own first
// (exec), in a round trip of its own. A change holds its job's insert to go
// with its COMMIT, or its group's next change: no query comes after it.
func (p *pipeline) heldInsert() bool {
	return slices.ContainsFunc(p.held.Peek(), func(s driver.HeldStatement) bool { return s.ID != nil })
}

func (p *pipeline) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if p.heldInsert() {
		if err := p.Flush(ctx); err != nil {
			p.failed = err
			return nil, err
		}
	}
	if p.heldCounted() {
		return answers().QueryContext(context.WithValue(ctx, answerKey{}, p.queryCounted(ctx, query, args)), query)
	}
	query, args = joined(p.held.Take(), driver.HeldStatement{SQL: query, Args: args})
	return p.tx.QueryContext(ctx, query, args...)
}

func (p *pipeline) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if p.heldInsert() {
		if err := p.Flush(ctx); err != nil {
			// As a counted write's: the Row carries it, and the
			// transaction's end says it again (failed).
			p.failed = err
			return answers().QueryRowContext(context.WithValue(ctx, answerKey{}, answer{err: err}), query)
		}
	}
	if p.heldCounted() {
		// The Row carries the error of the held writes too (answers), and
		// the transaction's end says it again (failed).
		return answers().QueryRowContext(context.WithValue(ctx, answerKey{}, p.queryCounted(ctx, query, args)), query)
	}
	query, args = joined(p.held.Take(), driver.HeldStatement{SQL: query, Args: args})
	return p.tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext is sqlc's for prepared queries, which these are not: a
// prepared statement is one statement, so the held ones are sent first.
func (p *pipeline) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := p.Flush(ctx); err != nil {
		return nil, err
	}
	return p.tx.PrepareContext(ctx, query)
}

// flush sends what is held, alone.
// Flush sends what is held, in one query.
func (p *pipeline) Flush(ctx context.Context) error {
	held := p.held.Take()
	if len(held) == 0 {
		return nil
	}
	_, err := p.exec(ctx, held, driver.HeldStatement{})
	return err
}

func (e *Engine) Queries(context.Context) driver.Queries { return queries{e.q} }

// TryLock takes fabric's GET_LOCK on a connection reserved for as long as
// the lock is held: the default fabric's is the name a manager that knows no
// fabrics takes; another fabric's adds "/<fabric>" to the database's name.
func (e *Engine) TryLock(ctx context.Context, fabric string) (driver.Lock, error) {
	lockName := e.lockName
	if fabric != driver.DefaultFabric {
		lockName = applierLock(e.dbName + "/" + fabric)
	}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock connection: %w", err)
	}
	q := mysqldb.New(conn)
	if galera(ctx, q) {
		conn.Close()
		return nil, fmt.Errorf("%w: wsrep_on is set, and Galera does not replicate GET_LOCK; "+
			"with [ha] ha = true the lease elects on Galera", driver.ErrLockNotClusterWide)
	}
	got, err := q.TryGetLock(ctx, lockName)
	if err != nil || got != 1 {
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("GET_LOCK: %w", err)
		}
		return nil, nil
	}
	l := &getLock{conn: conn, name: lockName}
	// After a cut link the server would keep this session, and the lock, for
	// as long as TCP takes to notice (hours): no manager could lead again.
	// The holder checks the lock every second, so a session idle for
	// driver.LockSessionIdle has lost its client, and the server ends it. Set
	// only on a session that holds the lock, which never returns to the pool.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", int(driver.LockSessionIdle.Seconds()))); err != nil {
		_ = l.Release(ctx)
		return nil, fmt.Errorf("lock session: %w", err)
	}
	return l, nil
}

type getLock struct {
	conn *sql.Conn
	name string
}

func (l *getLock) Check(ctx context.Context) error {
	return driver.StillHeld(mysqldb.New(l.conn).HoldsLock(ctx, l.name))
}

func (l *getLock) Release(ctx context.Context) error {
	_, _ = mysqldb.New(l.conn).ReleaseLock(ctx, l.name)
	// The pool drops the connection instead of reusing it: the session may
	// still hold the lock (if ReleaseLock failed), and its wait_timeout is the
	// lock session's, not the pool's (see TryLock).
	_ = l.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	if err := l.conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}

//go:generate go run ../driver/adaptergen

// queries adapt MariaDB's generated queries to driver.Queries and
// driver.LeaseQueries. adaptergen writes the mechanical adapters
// (adapters_gen.go: rows converted to the driver's types, arguments passed in
// the Params structs sqlc's MySQL engine makes); the methods in this package
// are what differs: its SQL takes some values twice, sqlc types a few
// arguments otherwise, and the lease's ttl is in microseconds. (MariaDB has no
// RETURNING: the new revision and a job's id come back as the last insert id,
// which the generated adapters read, driver.LastInsertID.)
type queries struct{ *mysqldb.Queries }

func newQueries(db mysqldb.DBTX) queries { return queries{mysqldb.New(db)} }

// InsertJobWithPlaces is InsertJob with the places in its row: one
// statement, whose insert id is the job's, as InsertJob's (on a pipelined
// change transaction it goes with the job-id lock held back before it).
func (q queries) InsertJobWithPlaces(ctx context.Context, j driver.Job, places []driver.Place) (int64, error) {
	return driver.LastInsertID(q.Queries.InsertJobWithPlaces(ctx, mysqldb.InsertJobWithPlacesParams{
		Fabric: j.Fabric, Revision: j.Revision, ObjectType: j.ObjectType, ObjectID: j.ObjectID, NetworkID: j.NetworkID,
		Operation: j.Operation, Status: j.Status, Description: j.Description, Result: j.Result, Error: j.Error,
		CreatedBy: j.CreatedBy, Request: j.Request, RequestID: j.RequestID, CreatedAt: j.CreatedAt,
		UpdatedAt: j.UpdatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Places: driver.PlacesJSON(places)}))
}

// NewTerm reads the term it started back in the same transaction (the store
// runs it in one).
func (q queries) NewTerm(ctx context.Context, fabric, holder string, now *time.Time) (int64, error) {
	if err := q.Queries.NewTerm(ctx, mysqldb.NewTermParams{Holder: holder, Heartbeat: now, Fabric: fabric}); err != nil {
		return 0, err
	}
	l, err := q.GetLeadership(ctx, fabric)
	return l.Term, err
}

// The job updates write finished_at (or started_at), a nullable column, and
// updated_at, which is not: MariaDB's SQL names the time twice, and sqlc makes
// a field of each.

func (q queries) CompleteJobs(ctx context.Context, fabric string, now *time.Time, revision, term int64) (int64, error) {
	return q.Queries.CompleteJobs(ctx, mysqldb.CompleteJobsParams{FinishedAt: now, Now: *now, Fabric: fabric, Revision: revision, Term: term})
}

func (q queries) CompleteJob(ctx context.Context, fabric string, now *time.Time, jobID, revision, term int64) (int64, error) {
	return q.Queries.CompleteJob(ctx, mysqldb.CompleteJobParams{FinishedAt: now, Now: *now, Fabric: fabric, JobID: jobID, Revision: revision, Term: term})
}

func (q queries) FailJob(ctx context.Context, fabric, reason string, now *time.Time, jobID, term int64) (int64, error) {
	return q.Queries.FailJob(ctx, mysqldb.FailJobParams{Error: reason, FinishedAt: now, Now: *now, Fabric: fabric, JobID: jobID, Term: term})
}

func (q queries) FailJobs(ctx context.Context, fabric, reason string, now *time.Time, revision, term int64) (int64, error) {
	return q.Queries.FailJobs(ctx, mysqldb.FailJobsParams{Error: reason, FinishedAt: now, Now: *now, Fabric: fabric, Revision: revision, Term: term})
}

func (q queries) MarkJobsRunning(ctx context.Context, fabric string, now *time.Time, revision, term int64) (int64, error) {
	return q.Queries.MarkJobsRunning(ctx, mysqldb.MarkJobsRunningParams{StartedAt: now, Now: *now, Fabric: fabric, Revision: revision, Term: term})
}

// DescribeOpenJobs: sqlc cannot type an argument of CONCAT and makes the
// reason an interface{}.
func (q queries) DescribeOpenJobs(ctx context.Context, fabric, reason string, now time.Time, revision, term int64) (int64, error) {
	return q.Queries.DescribeOpenJobs(ctx, mysqldb.DescribeOpenJobsParams{Reason: reason, Now: now, Fabric: fabric, Revision: revision, Term: term})
}

// DescribeJob: as DescribeOpenJobs.
func (q queries) DescribeJob(ctx context.Context, reason string, now time.Time, jobID int64, fabric string, term int64) (int64, error) {
	return q.Queries.DescribeJob(ctx, mysqldb.DescribeJobParams{Reason: reason, Now: now, JobID: jobID, Fabric: fabric, Term: term})
}

// DeleteAppliesBefore: sqlc types LIMIT's argument int32.
func (q queries) DeleteAppliesBefore(ctx context.Context, fabric string, keepFrom int64, before time.Time, batch int64, term int64) (int64, error) {
	return q.Queries.DeleteAppliesBefore(ctx, mysqldb.DeleteAppliesBeforeParams{Fabric: fabric, KeepFrom: keepFrom, Before: before,
		Limit: int32(batch), Term: term})
}

// DeleteFinishedJobsBefore: sqlc types LIMIT's argument int32.
func (q queries) DeleteFinishedJobsBefore(ctx context.Context, fabric string, before *time.Time, batch int64, term int64) (int64, error) {
	return q.Queries.DeleteFinishedJobsBefore(ctx, mysqldb.DeleteFinishedJobsBeforeParams{Fabric: fabric, Before: before, Limit: int32(batch), Term: term})
}

var _ driver.Driver = (*Engine)(nil)
