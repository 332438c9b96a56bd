package soak

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// nodeURL is the run's database on Galera node i (0-based), from the URL of
// the database on node 1.
func (s *servers) nodeURL(dbURL string, i int) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	node, err := url.Parse(s.galeraURLs[i])
	if err != nil {
		return "", err
	}
	u.Host = node.Host
	return u.String(), nil
}

func (s *servers) galeraNodeDir(i int) string {
	return filepath.Join(s.dir, "galera", fmt.Sprintf("n%d", i+1))
}

// killGaleraNode kills node i (0-based) with SIGKILL and waits until it is gone.
func (s *servers) killGaleraNode(i int) error {
	b, err := os.ReadFile(filepath.Join(s.galeraNodeDir(i), "pid"))
	if err != nil {
		return fmt.Errorf("Galera node %d's pid file: %w", i+1, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("Galera node %d's pid file: %w", i+1, err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !waitGone(pid, 30*time.Second) {
		return fmt.Errorf("Galera node %d (pid %d) outlived SIGKILL by 30 s", i+1, pid)
	}
	return nil
}

// startGaleraNode starts node i again (it rejoins the cluster by IST or SST
// from the others) and waits until it is Synced, up to two minutes.
func (s *servers) startGaleraNode(ctx context.Context, i int) error {
	dir := s.galeraNodeDir(i)
	log, err := os.OpenFile(filepath.Join(dir, "error.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("mariadbd", "--defaults-file="+filepath.Join(dir, "my.cnf"), "--user=mysql")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: an interrupt of the soak reaches it through
	// test-env.sh stop, as for the nodes test-env.sh started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start Galera node %d: %w", i+1, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c, err := config.ParseConnection(s.galeraURLs[i])
	if err != nil {
		return err
	}
	db, err := sql.Open("mysql", c.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var name, state string
		err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state)
		if err == nil && state == "Synced" {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("Galera node %d exited while rejoining; see %s", i+1, filepath.Join(dir, "error.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Galera node %d not Synced 2 minutes after its restart (%s %v); see %s", i+1, state, err,
				filepath.Join(dir, "error.log"))
		}
	}
}
