package postgres

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Plans. pgx prepares each statement once per connection, and PostgreSQL
// plans a prepared statement anew at each of its first five executions on
// that connection (plan_cache_mode = auto) before it settles on a generic
// plan, the same for every argument. A change's statements run on one of
// the pool's connections at random, and a connection lives at most an hour
// (pgxpool's MaxConnLifetime; half an hour idle): so a manager that records
// a change now and then plans most of its statements every time. The
// store's part of a port POST, timed inside the manager on the simulated
// fabric, took 1.25 ms (median) over a fresh manager's first 20 changes
// and 0.70 ms over its last 20 of 60; with these transactions' plans
// generic, afm-bench (8a)'s POST → apply start fell from 1.62 to 1.16 ms.
//
// Every statement of a change transaction (InChangeTx: a change, and the
// jobs' completion) finds its rows by a key: the same plan serves every
// argument, and planning it again changes nothing. So those transactions
// ask for the generic plan at once (SET LOCAL, sent with their BEGIN: no
// round trip). The other statements keep the server's choice: a read of the
// rows written since a revision (ListPortsSince) must scan an index for a
// recent revision and the table for an old one, which no generic plan does.

// A group of changes (a burst's, several callers at once) gains nothing
// from the setting: it runs each statement once a change, on one
// connection, so the server settles on its plans within the first group.
// Nor did it measure better with it: BenchmarkRecordPortsConcurrently
// (storetest) was slower a change in 10 of 16 interleaved pairs with the
// setting (median 3.5 %, from 16 % faster to 53 % slower). So a transaction
// that holds a savepoint before its setting was sent drops it
// (planAsTheServerChooses): only a change alone (each POST of a client that
// waits for its answer, the jobs' completion) plans generically.

// genericPlans is the statement that has the rest of a transaction plan its
// prepared statements once (PostgreSQL 12 and later).
const genericPlans = "SET LOCAL plan_cache_mode = force_generic_plan"

// genericPlansSince is the first major version with plan_cache_mode.
const genericPlansSince = 12

// plansGenerically says whether conn's server has plan_cache_mode: read
// on each connection, from what the server said at its start, so that a
// pool that reconnects to another server (a failover) never sends a setting
// that server refuses, which would fail every change.
func plansGenerically(conn *pgxpool.Conn) bool {
	return majorVersion(conn.Conn().PgConn().ParameterStatus("server_version")) >= genericPlansSince
}

// majorVersion reads the major version from a server_version such as
// "15.10 (Debian 15.10-0+deb12u1)", "16beta2" or "9.6.24": its leading
// number (9 for 9.6, which has no plan_cache_mode either); 0 when there is
// none.
func majorVersion(v string) int {
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(v)
	}
	n, err := strconv.Atoi(v[:end])
	if err != nil {
		return 0
	}
	return n
}

// planAsTheServerChooses drops the generic plans' setting from what p holds,
// before a savepoint: sent with the first statement, it never reached the
// server (a group's first savepoint is held with its BEGIN).
func (p *pipeline) planAsTheServerChooses() { p.held.Unhold(genericPlans) }
