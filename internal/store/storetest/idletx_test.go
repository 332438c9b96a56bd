package storetest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// A leader's link to the database is cut in the middle of a fenced write
// (as in FinishApply): the server keeps the session, inside its
// transaction, and learns nothing until it sends. On MariaDB the fence's
// shared lock on the lease's row holds every other manager's take; on
// PostgreSQL the job rows' locks hold their completion by the next leader.
// Both must go once the session has idled inside its transaction for
// driver.IdleTransactionFor(lease): the take and the completion succeed
// before a deadline several times that bound (without it, the server keeps
// the session for hours: MariaDB's wait_timeout, PostgreSQL's keepalive),
// and the cut session is gone from the server's sessions.
func TestSessionCutInsideAFencedWriteEnds(t *testing.T) {
	onServerEngines(t, func(t *testing.T, engine string) {
		db := NewMigratedDatabase(t, engine)
		testCutInsideFencedWrite(t, db, db)
	})
	// On Galera, a take through the same node waits on the lock as on
	// MariaDB; one through another node aborts the cut transaction when its
	// write replicates (a brute-force abort), which leaves the session
	// alive, outside any transaction, and its locks gone.
	for _, taker := range []struct {
		name string
		node int
	}{{"galera", 0}, {"galera/another node", 1}} {
		t.Run(taker.name, func(t *testing.T) {
			dbs := NewGaleraDatabase(t)
			OpenDatabase(t, dbs[0]) // migrates
			testCutInsideFencedWrite(t, dbs[0], dbs[taker.node])
		})
	}
}

// leaseForCutTest is the lease of the managers of testCutInsideFencedWrite:
// short, so that the cut leader's lease expires within the test.
const leaseForCutTest = 2 * time.Second

func testCutInsideFencedWrite(t *testing.T, leaderDB, takerDB Database) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	taker := OpenDatabase(t, takerDB)
	job := addNetwork(t, taker, netA, 101)

	l, won := take(t, taker, "leader", leaseForCutTest)
	if !won {
		t.Fatal("the leader could not take a free lease")
	}
	link := newCutLink(t, leaderDB)
	leader := openEngine(t, ctx, link.database(t),
		driver.WithIdleTransaction(driver.IdleTransactionFor(leaseForCutTest)))

	// The leader completes the job, fenced by its term, and its link is cut
	// before it commits.
	inside, cut := make(chan error, 1), make(chan struct{})
	leaderCtx, stopLeader := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = leader.InChangeTx(leaderCtx, func(tx driver.ChangeTx) error {
			now := time.Now().UTC()
			n, err := tx.CompleteJobs(leaderCtx, driver.DefaultFabric, &now, job.Revision, l.Term)
			if err == nil && n != 1 {
				err = errors.New("the leader's fenced completion matched no job")
			}
			inside <- err
			select { // its next statement would never be answered
			case <-cut:
				<-leaderCtx.Done()
			case <-leaderCtx.Done():
			}
			return leaderCtx.Err()
		})
	}()
	// The link goes first: the leader's rollback and its engine's Close
	// then fail at once rather than wait on the cut link.
	t.Cleanup(func() { stopLeader(); link.close(); <-done })
	if err := <-inside; err != nil {
		t.Fatalf("the leader's completion: %v", err)
	}
	cutSession := link.inTransaction(t, ctx)
	if len(cutSession) != 1 {
		t.Fatalf("the leader's sessions inside a transaction: %v; want one", cutSession)
	}
	link.cut()
	close(cut)

	// Its lease expires; another manager takes it, then completes the job.
	bound := driver.IdleTransactionFor(leaseForCutTest)
	deadline := time.Now().Add(leaseForCutTest + 5*bound)
	var nl store.Lease
	for {
		tctx, tcancel := context.WithTimeout(ctx, leaseForCutTest/5)
		lease, won, err := leases(t, taker).TakeLease(tctx, "taker", leaseForCutTest)
		tcancel()
		if err == nil && won {
			nl = lease
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no manager took the cut leader's lease within %v: %+v, %v", leaseForCutTest+5*bound, lease, err)
		}
		time.Sleep(leaseForCutTest / 10)
	}
	cctx, ccancel := context.WithDeadline(ctx, deadline.Add(bound))
	defer ccancel()
	if n, err := taker.CompleteJobs(cctx, nl.Term, job.Revision); err != nil || n != 1 {
		t.Fatalf("the new leader's completion of the cut leader's job = %d, %v; want 1", n, err)
	}
	if leaderDB.URL != takerDB.URL {
		return // the session lives on (above)
	}
	if alive := link.alive(t, ctx, cutSession); len(alive) > 0 {
		t.Errorf("the cut leader's session %v is still on the server; want it ended by the server", alive)
	}
}

// openEngine opens db's engine with opts, closed when the test ends.
func openEngine(t *testing.T, ctx context.Context, db Database, opts ...driver.Option) driver.Driver {
	t.Helper()
	var e driver.Driver
	var err error
	log := slog.New(slog.DiscardHandler)
	if db.Engine == config.EnginePostgres {
		e, err = postgres.Open(ctx, db.DSN, log, opts...)
	} else {
		e, err = mysql.Open(ctx, db.DSN, log, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// cutLink forwards connections to a database's server until cut: then it
// forwards nothing more either way, and keeps both sides open, as a cut link
// does (the server learns nothing until it sends, and its sends are lost).
// It knows the server's sessions that came through it by their client port:
// its own side of each connection to the server.
type cutLink struct {
	t      *testing.T
	ln     net.Listener
	target string
	db     Database

	mu    sync.Mutex
	isCut bool
	conns []net.Conn
	ports []string // the local port of each connection to the server
}

func newCutLink(t *testing.T, db Database) *cutLink {
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cutLink{t: t, ln: ln, target: u.Host, db: db}
	go l.serve()
	t.Cleanup(l.close)
	return l
}

// close closes the link and every connection through it.
func (l *cutLink) close() {
	l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// database is the link's database as a client through it names it.
func (l *cutLink) database(t *testing.T) Database {
	u, err := url.Parse(l.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = l.ln.Addr().String()
	u.Path = "/"
	db, err := testdb.On(u.String(), l.db.Name())
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func (l *cutLink) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		_, port, _ := net.SplitHostPort(up.LocalAddr().String())
		l.mu.Lock()
		l.conns = append(l.conns, c, up)
		l.ports = append(l.ports, port)
		l.mu.Unlock()
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

// pipe copies src to dst until the link is cut; then it reads and drops.
func (l *cutLink) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			if !l.cutNow() {
				dst.Close()
			}
			return
		}
		if l.cutNow() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (l *cutLink) cutNow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.isCut
}

func (l *cutLink) cut() {
	l.mu.Lock()
	l.isCut = true
	l.mu.Unlock()
}

// inTransaction are the ids of the server's sessions that came through the
// link and are inside a transaction (on MariaDB, all that came through it).
func (l *cutLink) inTransaction(t *testing.T, ctx context.Context) []int64 {
	t.Helper()
	l.mu.Lock()
	ports := slices.Clone(l.ports)
	l.mu.Unlock()
	if len(ports) == 0 {
		return nil
	}
	// The ports are the link's own numbers, written into the query.
	query := "SELECT pid FROM pg_stat_activity WHERE client_port IN (" + strings.Join(ports, ",") +
		") AND state LIKE 'idle in transaction%'"
	if l.db.Engine != config.EnginePostgres {
		// Which session is inside a transaction takes the PROCESS privilege
		// to read (innodb_trx), which the test's user lacks; the leader's
		// pool has this one connection through the link (the one Open
		// pinged on, handed to the transaction).
		query = "SELECT id FROM information_schema.processlist WHERE SUBSTRING_INDEX(host, ':', -1) IN ('" +
			strings.Join(ports, "','") + "')"
	}
	return sessionIDs(t, ctx, l.db, query)
}

// alive are those of ids still on the server.
func (l *cutLink) alive(t *testing.T, ctx context.Context, ids []int64) []int64 {
	t.Helper()
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	query := "SELECT pid FROM pg_stat_activity WHERE pid IN (" + strings.Join(list, ",") + ")"
	if l.db.Engine != config.EnginePostgres {
		query = "SELECT id FROM information_schema.processlist WHERE id IN (" + strings.Join(list, ",") + ")"
	}
	return sessionIDs(t, ctx, l.db, query)
}

// sessionIDs runs query, which reads one column of session ids, on a
// connection of its own to db's server.
func sessionIDs(t *testing.T, ctx context.Context, db Database, query string) []int64 {
	t.Helper()
	name := "mysql"
	if db.Engine == config.EnginePostgres {
		name = "pgx"
	}
	conn, err := sql.Open(name, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("read the server's sessions: %v", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the server's sessions: %v", err)
	}
	return ids
}
