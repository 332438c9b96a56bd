package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/managerproc"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// benchToken is the [api] token of the managers the suite starts; they listen on
// loopback only and live for one run.
const benchToken = "afm-bench-token-0123456789"

// rig is one engine's set-up: a fresh database, a simulated fabric, and a
// manager (running its own OpenSM) on both.
type rig struct {
	engine    string
	dir       string
	db        database
	fabric    *fabricsim.Fabric
	api       *apiClient
	manager   *managerproc.Process
	logPath   string // the manager's output
	opensmLog string // OpenSM's log, in the manager's [opensm] config_dir
	network   string // the VLAN network every port joins
	ports     *portSource
	// storage is the second fabric of a rig of two (fabrics.go), nil for one.
	storage *fabricsim.Fabric
}

// startRig creates the database, starts the fabric and the manager, and creates
// the network the measurements put their ports in.
func startRig(ctx context.Context, engine, binary, dir string, fo fabricsim.Options, log *slog.Logger) (*rig, error) {
	return startRigWith(ctx, engine, binary, dir, fo, verifyLog, nil, log)
}

// The [opensm] verify of a rig: the default (tables), or log where the
// bench's ports carry GUIDs no simulated host has (thousands of them,
// portSource), whose tables no read can prove: such a job would wait
// verify_timeout and fail. The measurements on those ports say so; the
// fabric measurements (fabric.go) run on host ports with the default.
const (
	verifyTables = ""
	verifyLog    = "verify = log"
)

// moreConf is configuration a rig adds to the one startRig writes: lines of
// [api], and sections appended to the file.
type moreConf struct {
	api      []string
	sections []testenv.Section
}

// startRigWith is startRig with more configuration: extra, when set, starts
// what it needs (once the first fabric runs) and returns what to add.
func startRigWith(ctx context.Context, engine, binary, dir string, fo fabricsim.Options, verify string,
	extra func(ctx context.Context, r *rig) (moreConf, error), log *slog.Logger) (_ *rig, err error) {
	r := &rig{engine: engine, dir: dir, logPath: filepath.Join(dir, "manager.log")}
	defer func() {
		if err != nil {
			r.stop(log)
		}
	}()
	if r.db, err = createDatabase(ctx, engine, dir); err != nil {
		return nil, err
	}
	if r.fabric, err = fabricsim.Start(ctx, filepath.Join(dir, "fabric"), fo); err != nil {
		return nil, fmt.Errorf("start simulated fabric: %w", err)
	}
	addr, err := fabricsim.FreeAddr()
	if err != nil {
		return nil, err
	}
	configDir := filepath.Join(dir, "opensm")
	r.opensmLog = filepath.Join(configDir, "opensm.log")
	// Everything else keeps the manager's defaults (poll_interval, check_interval,
	// sweep_timeout, the audit, the second-SM look): the figures are those of
	// a manager as shipped, but for verify where the caller says log.
	var more moreConf
	if extra != nil {
		if more, err = extra(ctx, r); err != nil {
			return nil, err
		}
	}
	conf := testenv.AFMConf{Listen: addr, Token: benchToken, API: more.api, Connection: r.db.url,
		ConfigDir: configDir, EnvFile: r.fabric.EnvFile(), OpenSM: []string{verify}, GUID: r.fabric.SMGUID.String(),
		Sections: more.sections}
	confPath := filepath.Join(dir, "afm.conf")
	if err := conf.Write(confPath); err != nil {
		return nil, err
	}
	r.api = newAPIClient("http://" + addr)
	if err := r.startManager(ctx, binary, confPath); err != nil {
		return nil, err
	}
	if err := fabricsim.ConfirmSwitches(ctx, binary, confPath, configDir); err != nil {
		return nil, err
	}
	r.network = "3b9d6a52-7c1e-4f0a-9e2d-00000000b001"
	r.ports = newPortSource(r.network)
	job, err := r.api.postNetwork(ctx, r.network, 101)
	if err != nil {
		return nil, err
	}
	// The first job completes once OpenSM is up and has swept: from here on the
	// fabric is quiet.
	if _, err := r.api.waitCompleted(ctx, job, 20*time.Millisecond); err != nil {
		return nil, fmt.Errorf("network creation: %w (manager log: %s)", err, r.logPath)
	}
	return r, nil
}

func (r *rig) startManager(ctx context.Context, binary, confPath string) (err error) {
	r.manager, err = managerproc.Start(ctx, managerproc.Options{
		Binary: binary, Args: []string{"--config-file", confPath}, Log: r.logPath,
		Env: fabricsim.WithSbinPath(os.Environ()), Serving: r.api.healthy, Within: 60 * time.Second})
	return err
}

// stop ends the manager (and with it OpenSM), the fabric and the database; it
// is safe on a rig that started only in part.
func (r *rig) stop(log *slog.Logger) {
	if r.manager != nil {
		r.manager.Stop(30 * time.Second)
	}
	for _, f := range []*fabricsim.Fabric{r.fabric, r.storage} {
		if f == nil {
			continue
		}
		if err := f.Stop(); err != nil {
			log.Warn("stop simulated fabric", "engine", r.engine, "dir", f.Dir, "error", err)
		}
	}
	if r.db.drop != nil {
		if err := r.db.drop(); err != nil {
			log.Warn("drop benchmark database", "engine", r.engine, "error", err)
		}
	}
}

// managerPID is the manager process's id.
func (r *rig) managerPID() int { return r.manager.Pid() }

// opensmPID finds the manager's OpenSM: its child process named opensm.
func (r *rig) opensmPID() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		if st.ppid == r.managerPID() && st.comm == "opensm" {
			return pid, nil
		}
	}
	return 0, errors.New("the manager has no OpenSM child process")
}

// procStat is what the suite reads of /proc/<pid>/stat.
type procStat struct {
	comm         string
	ppid         int
	utime, stime uint64 // clock ticks
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold blanks; the fields after
	// the last ')' are numbered from 3 (state).
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	st := procStat{comm: s[open+1 : closing]}
	st.ppid, _ = strconv.Atoi(fields[1])                // field 4
	st.utime, _ = strconv.ParseUint(fields[11], 10, 64) // field 14
	st.stime, _ = strconv.ParseUint(fields[12], 10, 64) // field 15
	return st, nil
}

// healthy is true once the manager answers /healthz.
func (c *apiClient) healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}
