package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/managerproc"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// failoverResult is the HA failover: three managers with [ha] ha = true on one
// database and one fabric; the leader is killed with -9, and the time is taken
// from the kill to the first job Completed after it, a port change sent to a
// surviving manager right after the kill.
type failoverResult struct {
	leaseTimeout time.Duration
	took         []time.Duration // one per round
}

// haManager is one of the failover rig's managers.
type haManager struct {
	conf    string
	api     *apiClient
	proc    *managerproc.Process
	logPath string
}

func measureFailover(ctx context.Context, engine, binary, dir string, leaseTimeout time.Duration, rounds int,
	log *slog.Logger) (res failoverResult, err error) {
	res.leaseTimeout = leaseTimeout
	db, err := createDatabase(ctx, engine, dir)
	if err != nil {
		return res, err
	}
	defer func() {
		if db.drop != nil {
			if derr := db.drop(); derr != nil {
				log.Warn("drop failover database", "error", derr)
			}
		}
	}()
	// A host for each round: each round's change binds a host's port, which
	// the survivor reads back (verify = tables, the default).
	f, err := fabricsim.Start(ctx, filepath.Join(dir, "fabric"), fabricsim.Options{Hosts: max(4, rounds), SMs: 3})
	if err != nil {
		return res, fmt.Errorf("start simulated fabric: %w", err)
	}
	defer f.Stop()
	managers, err := startHAManagers(ctx, binary, dir, db.url, f, leaseTimeout)
	defer func() {
		for _, m := range managers {
			m.stop()
		}
	}()
	if err != nil {
		return res, err
	}
	leader, err := haLeader(ctx, binary, managers)
	if err != nil {
		return res, err
	}
	network := "3b9d6a52-7c1e-4f0a-9e2d-00000000f001"
	if err := createFailoverNetwork(ctx, binary, leader, network); err != nil {
		return res, err
	}
	for round := range rounds {
		took, err := failoverRound(ctx, managers, leader, f.Hosts[round].PortGUID, network, round)
		if err != nil {
			return res, err
		}
		res.took = append(res.took, took)
		log.Info("failover", "round", round+1, "took", took)
		if leader, err = rejoin(ctx, binary, leader, managers); err != nil {
			return res, err
		}
	}
	return res, nil
}

// startHAManagers starts the rig's three managers. It returns those it
// started even with an error, for the caller to stop.
func startHAManagers(ctx context.Context, binary, dir, dbURL string, f *fabricsim.Fabric,
	leaseTimeout time.Duration) ([]*haManager, error) {
	var managers []*haManager
	for k := 1; k <= 3; k++ {
		m, err := startHAManager(ctx, binary, dir, dbURL, f, k, leaseTimeout)
		if m != nil {
			managers = append(managers, m)
		}
		if err != nil {
			return managers, err
		}
	}
	return managers, nil
}

// createFailoverNetwork confirms the fabric's switches and creates the
// network the rounds' ports join, through the leader, waiting for its job.
func createFailoverNetwork(ctx context.Context, binary string, leader *haManager, network string) error {
	configDir := filepath.Join(filepath.Dir(leader.conf), "opensm")
	if err := fabricsim.ConfirmSwitches(ctx, binary, leader.conf, configDir); err != nil {
		return err
	}
	job, err := leader.api.postNetwork(ctx, network, 102)
	if err != nil {
		return err
	}
	if _, err := leader.api.waitCompleted(ctx, job, 20*time.Millisecond); err != nil {
		return fmt.Errorf("network creation: %w", err)
	}
	return nil
}

// failoverRound kills the leader with -9, sends a survivor a change binding
// the host port guid at once, and times the kill to that job's Completed.
func failoverRound(ctx context.Context, managers []*haManager, leader *haManager, guid fabric.GUID, network string,
	round int) (time.Duration, error) {
	killed := time.Now()
	if err := leader.proc.Kill(); err != nil {
		return 0, err
	}
	var survivor *haManager
	for _, m := range managers {
		if m != leader {
			survivor = m
			break
		}
	}
	job, err := survivor.api.postPort(ctx, hostPort(guid, network, round))
	if err != nil {
		return 0, err
	}
	done, err := survivor.api.waitCompleted(ctx, job, 10*time.Millisecond)
	if err != nil {
		return 0, fmt.Errorf("round %d: the job after the kill: %w", round+1, err)
	}
	return done.Sub(killed), nil
}

// rejoin starts the killed manager again, a follower for the next round, and
// returns the leader elected meanwhile.
func rejoin(ctx context.Context, binary string, killed *haManager, managers []*haManager) (*haManager, error) {
	if err := killed.start(ctx, binary); err != nil {
		return killed, err
	}
	return haLeader(ctx, binary, managers)
}

func startHAManager(ctx context.Context, binary, dir, dbURL string, f *fabricsim.Fabric, k int,
	leaseTimeout time.Duration) (*haManager, error) {
	mdir := filepath.Join(dir, fmt.Sprintf("manager-%d", k))
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return nil, err
	}
	env, guid := f.SMEnv(k)
	envFile := filepath.Join(mdir, "opensm.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	addr, err := fabricsim.FreeAddr()
	if err != nil {
		return nil, err
	}
	// The defaults but for HA: verify = tables, the audit, the second-SM look.
	conf := testenv.AFMConf{Listen: addr, Token: benchToken, Connection: dbURL,
		ConfigDir: filepath.Join(mdir, "opensm"), EnvFile: envFile, GUID: guid.String(),
		Sections: []testenv.Section{{Name: "ha", Lines: []string{"ha = true", fmt.Sprintf("lease_timeout = %g", leaseTimeout.Seconds())}}}}
	m := &haManager{conf: filepath.Join(mdir, "afm.conf"), api: newAPIClient("http://" + addr),
		logPath: filepath.Join(mdir, "manager.log")}
	if err := conf.Write(m.conf); err != nil {
		return nil, err
	}
	return m, m.start(ctx, binary)
}

func (m *haManager) start(ctx context.Context, binary string) (err error) {
	m.proc, err = managerproc.Start(ctx, managerproc.Options{
		Binary: binary, Args: []string{"--config-file", m.conf}, Log: m.logPath,
		Env: fabricsim.WithSbinPath(os.Environ()), Serving: m.api.healthy, Within: time.Minute})
	return err
}

func (m *haManager) stop() {
	if m.proc != nil {
		m.proc.Stop(30 * time.Second)
	}
}

// haLeader waits for a running manager to hold the lease, as --status says.
func haLeader(ctx context.Context, binary string, managers []*haManager) (*haManager, error) {
	host, _ := os.Hostname()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		for _, m := range managers {
			select {
			case <-m.proc.Exited():
				continue
			default:
			}
			out, err := exec.CommandContext(ctx, binary, "--config-file", m.conf, "--status", "--json").Output()
			if err != nil {
				continue
			}
			var s struct {
				Lease *struct {
					Holder string `json:"holder"`
				} `json:"lease"`
			}
			if json.Unmarshal(out, &s) != nil || s.Lease == nil {
				continue
			}
			for _, l := range managers {
				if s.Lease.Holder == fmt.Sprintf("%s pid %d", host, l.proc.Pid()) {
					return l, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, errors.New("no manager took the lease within two minutes")
}
