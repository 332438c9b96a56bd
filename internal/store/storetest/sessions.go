package storetest

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// EndSessions ends every session that the user of adminURL (an
// AFM_TEST_*_URL: the manager's user) has in database, as a server restart
// or a failover would: pg_terminate_backend, KILL CONNECTION, which a user
// may do to its own sessions. It waits until the server has ended them, and
// returns how many it ended.
func EndSessions(t testing.TB, engine, adminURL, database string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if engine == config.EnginePostgres {
		return endPostgresSessions(t, ctx, adminURL, database)
	}
	return endMySQLSessions(t, ctx, adminURL, database)
}

func endPostgresSessions(t testing.TB, ctx context.Context, adminURL, database string) int {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("end sessions: %v", err)
	}
	defer admin.Close(ctx)
	// The user's own sessions (an autovacuum worker in the database is the
	// superuser's, and ending it is refused), the pids first: in one WHERE,
	// PostgreSQL may call pg_terminate_backend before the other conditions.
	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = $1 AND usename = current_user AND pid <> pg_backend_pid()`, database)
	if err != nil {
		t.Fatalf("end sessions: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatalf("end sessions: %v", err)
	}
	n := 0
	for _, pid := range pids {
		var ended bool // false: it had ended meanwhile
		err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&ended)
		if err != nil {
			t.Fatalf("end session %d: %v", pid, err)
		}
		if ended {
			n++
		}
	}
	return n
}

func endMySQLSessions(t testing.TB, ctx context.Context, adminURL, database string) int {
	c, err := config.ParseConnection(adminURL)
	if err != nil {
		t.Fatalf("end sessions: %v", err)
	}
	db, err := sql.Open("mysql", c.DSN)
	if err != nil {
		t.Fatalf("end sessions: %v", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx) // one session, so that CONNECTION_ID() is the one asking
	if err != nil {
		t.Fatalf("end sessions: %v", err)
	}
	defer conn.Close()
	listed := func() []int64 {
		rows, err := conn.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
			WHERE DB = ? AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) AND ID <> CONNECTION_ID()`, database)
		if err != nil {
			t.Fatalf("end sessions: %v", err)
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatalf("end sessions: %v", err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	var killed []int64
	for _, id := range listed() {
		if _, err := conn.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
			t.Logf("KILL CONNECTION %d: %v", id, err) // it may have ended meanwhile
			continue
		}
		killed = append(killed, id)
	}
	// A killed session is listed until it has closed. Only those: the
	// manager may have dialled new ones meanwhile.
	for slices.ContainsFunc(listed(), func(id int64) bool { return slices.Contains(killed, id) }) {
		if ctx.Err() != nil {
			t.Fatalf("end sessions: killed sessions still listed after 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return len(killed)
}
