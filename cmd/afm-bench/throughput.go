package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver the manager uses for MariaDB
	_ "modernc.org/sqlite"             // and for SQLite

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// load is what concurrent clients achieved in a fixed time.
type load struct {
	n    int
	took time.Duration
	lat  latencies
}

func (l load) perSecond() float64 { return rate(l.n, l.took) }

// runLoad calls op from clients goroutines, back to back, for d, and times
// every call. The first error stops the run.
func runLoad(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, client int) error) (load, error) {
	var (
		mu  sync.Mutex
		res load
		wg  sync.WaitGroup
	)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			var mine latencies
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t := time.Now()
				if err := op(ctx, c); err != nil {
					cancel(err)
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			res.lat = append(res.lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	res.n = len(res.lat)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, ctx.Err()
}

// apiResult: the API under concurrent clients, beside the database's own
// single-row insert rate.
type apiResult struct {
	insertRate float64 // rows per second
	insertHow  string
	post, get  load
}

func measureAPI(ctx context.Context, r *rig, clients int, d time.Duration) (apiResult, error) {
	var res apiResult
	var err error
	res.insertRate, res.insertHow, err = insertRate(ctx, r, clients, d)
	if err != nil {
		return res, fmt.Errorf("%s insert rate: %w", r.engine, err)
	}
	firstJob := r.api.jobCount()
	res.post, err = runLoad(ctx, clients, d, func(ctx context.Context, _ int) error {
		_, err := r.api.postPort(ctx, r.ports.port())
		return err
	})
	if err != nil {
		return res, fmt.Errorf("POST Port load: %w", err)
	}
	posted := r.api.jobCount() - firstJob
	if posted == 0 {
		return res, fmt.Errorf("POST Port load: no job given out in %s", d)
	}
	res.get, err = runLoad(ctx, clients, d, func(ctx context.Context, _ int) error {
		_, err := r.api.jobStatus(ctx, jobPath(r.api.jobAt(firstJob+rand.IntN(posted))))
		return err
	})
	if err != nil {
		return res, fmt.Errorf("GET job load: %w", err)
	}
	return res, nil
}

// insertRate is how many single-row autocommit INSERTs per second the
// manager's database takes from clients concurrent clients: pgbench for
// PostgreSQL, a Go loop over the manager's own driver and settings otherwise.
func insertRate(ctx context.Context, r *rig, clients int, d time.Duration) (float64, string, error) {
	switch r.engine {
	case config.EnginePostgres:
		return pgbenchInsertRate(ctx, r, clients, d)
	case config.EngineMySQL:
		db, err := sql.Open("mysql", r.db.dsn)
		if err != nil {
			return 0, "", err
		}
		defer db.Close()
		db.SetMaxOpenConns(clients)
		db.SetMaxIdleConns(clients)
		create := "CREATE TABLE afm_bench_insert (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64) NOT NULL, " +
			"created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))"
		l, err := sqlInsertLoad(ctx, db, create, clients, d)
		return l.perSecond(), fmt.Sprintf("Go loop, %d clients, go-sql-driver/mysql", clients), err
	case config.EngineSQLite:
		// The manager's settings (internal/store/sqlite): WAL, synchronous FULL,
		// BEGIN IMMEDIATE, at most 4 connections.
		q := url.Values{}
		for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)"} {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
		db, err := sql.Open("sqlite", "file:"+filepath.Join(r.dir, "insert-rate.db")+"?"+q.Encode())
		if err != nil {
			return 0, "", err
		}
		defer db.Close()
		db.SetMaxOpenConns(4)
		create := "CREATE TABLE afm_bench_insert (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT NOT NULL, " +
			"created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
		l, err := sqlInsertLoad(ctx, db, create, clients, d)
		return l.perSecond(), fmt.Sprintf("Go loop, %d clients, modernc.org/sqlite, the manager's pragmas", clients), err
	}
	return 0, "", fmt.Errorf("unknown engine %q", r.engine)
}

func sqlInsertLoad(ctx context.Context, db *sql.DB, create string, clients int, d time.Duration) (load, error) {
	if _, err := db.ExecContext(ctx, create); err != nil {
		return load{}, fmt.Errorf("create insert table: %w", err)
	}
	return runLoad(ctx, clients, d, func(ctx context.Context, c int) error {
		_, err := db.ExecContext(ctx, "INSERT INTO afm_bench_insert (v) VALUES (?)", "client-"+strconv.Itoa(c))
		return err
	})
}

var pgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

func pgbenchInsertRate(ctx context.Context, r *rig, clients int, d time.Duration) (float64, string, error) {
	pgbench, err := findPgbench()
	if err != nil {
		return 0, "", err
	}
	create := "CREATE TABLE afm_bench_insert (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, " +
		"created_at TIMESTAMPTZ NOT NULL DEFAULT now())"
	if err := postgresExec(ctx, r.db.dsn, create); err != nil {
		return 0, "", fmt.Errorf("create insert table: %w", err)
	}
	script := filepath.Join(r.dir, "insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO afm_bench_insert (v) VALUES ('client-' || :client_id);\n"), 0o644); err != nil {
		return 0, "", err
	}
	seconds := max(int(d.Round(time.Second)/time.Second), 1)
	// pgbench's clock runs while its clients connect: on a loaded machine a
	// run of a second or two (--smoke) can end before one INSERT, and then
	// prints no rate. Such a run measured nothing; it runs again, longer.
	for range 3 {
		args := []string{"-n", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(seconds), "-f", script, r.db.dsn}
		out, err := exec.CommandContext(ctx, pgbench, args...).CombinedOutput()
		if err != nil {
			return 0, "", fmt.Errorf("pgbench: %w: %s", err, out)
		}
		tps, ran, err := pgbenchRate(out)
		if err == nil && !ran {
			seconds *= 2
			continue
		}
		return tps, fmt.Sprintf("pgbench -f (one INSERT), %d clients", clients), err
	}
	return 0, "", fmt.Errorf("pgbench: no INSERT in three runs, the last of %d s", seconds/2)
}

// pgbenchRate reads the rate out of pgbench's summary; ran is false for a run
// that ended before its first transaction, which prints no rate.
func pgbenchRate(out []byte) (tps float64, ran bool, err error) {
	if pgbenchNone.Match(out) {
		return 0, false, nil
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return 0, false, fmt.Errorf("pgbench: no tps line in its output: %s", out)
	}
	tps, err = strconv.ParseFloat(string(m[1]), 64)
	return tps, true, err
}

// pgbenchNone is pgbench's summary of a run that ended before any transaction.
var pgbenchNone = regexp.MustCompile(`(?m)^number of transactions actually processed: 0$`)

// findPgbench looks in PATH, then in the newest PostgreSQL's directory, where
// Debian's postgresql package puts it.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(found) == 0 {
		return "", errors.New("pgbench not found in PATH or /usr/lib/postgresql/*/bin: install the Debian package postgresql")
	}
	sort.Slice(found, func(i, j int) bool { return versionLess(found[i], found[j]) })
	return found[len(found)-1], nil
}

// versionLess orders .../postgresql/<major>/bin/pgbench by major version.
func versionLess(a, b string) bool {
	major := func(p string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return n
	}
	return major(a) < major(b)
}
