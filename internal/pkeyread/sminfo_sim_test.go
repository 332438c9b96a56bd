package pkeyread_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// startSM starts a real OpenSM on the k-th SM HCA of f with priority, in a
// directory of its own (log, partitions, cache), and returns its GUID and a
// function that stops it, and its log.
func startSM(t *testing.T, f *fabricsim.Fabric, k, priority int) (fabric.GUID, func(), string) {
	t.Helper()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	env, guid := f.SMEnv(k)
	dir := t.TempDir()
	for i, line := range env {
		if k > 1 && strings.HasPrefix(line, "OSM_CACHE_DIR=") || strings.HasPrefix(line, "OSM_TMP_DIR=") {
			env[i] = strings.SplitN(line, "=", 2)[0] + "=" + dir
		}
	}
	partitions := filepath.Join(dir, "partitions.conf")
	write(t, partitions, "Default=0x7fff,ipoib : ALL=limited, SELF=full ;\n")
	conf := filepath.Join(dir, "opensm.conf")
	write(t, conf, fmt.Sprintf("log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 1\nsm_priority %d\n"+
		"sminfo_polling_timeout 500\npolling_retry_number 2\n", priority))
	logFile := filepath.Join(dir, "opensm.log")
	cmd := exec.Command(opensm, "-F", conf, "-g", guid.String(), "-P", partitions, "-f", logFile,
		"-d", "2", "--dump_files_dir", dir)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return guid, stop, logFile
}

func readMasters(t *testing.T, f *fabricsim.Fabric) (pkeyread.Masters, error) {
	d, ok := pkeyread.SimDialerFromEnv(f.Env())
	if !ok {
		t.Fatal("no simulator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var tid atomic.Uint32
	lid, err := f.LID(fabricsim.SMGUID)
	if err != nil {
		t.Fatal(err)
	}
	return pkeyread.ReadMasters(ctx, conn, 0, &tid, fabricsim.SMGUID, uint16(lid))
}

// TestReadMastersOnSimulatedFabric follows the master through a second,
// real OpenSM: one of a higher priority takes the subnet over and is named;
// once it stops, the own OpenSM is master again; one of a lower priority
// stays STANDBY and the own OpenSM stays master.
func TestReadMastersOnSimulatedFabric(t *testing.T) {
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: 4, SMs: 3})
	_, _, ownLog := startSM(t, f, 1, 1)
	waitFor(t, "the own OpenSM's SUBNET UP", logSays(ownLog, "SUBNET UP"))
	isMaster := func(guid fabric.GUID, priority uint8) func() bool {
		return func() bool {
			m, err := readMasters(t, f)
			return err == nil && m.Master.GUID == guid && m.Master.State == pkeyread.SMMaster && m.Master.Priority == priority &&
				m.Own.GUID == fabricsim.SMGUID && (guid == fabricsim.SMGUID) == (m.Own.State == pkeyread.SMMaster)
		}
	}
	waitFor(t, "the own OpenSM named master", isMaster(fabricsim.SMGUID, 1))
	foreign, stop, _ := startSM(t, f, 2, 15)
	waitFor(t, "the higher-priority OpenSM named master", isMaster(foreign, 15))
	stop()
	waitFor(t, "the own OpenSM named master again", isMaster(fabricsim.SMGUID, 1))
	_, _, lowerLog := startSM(t, f, 3, 0)
	waitFor(t, "the lower-priority OpenSM to go STANDBY", logSays(lowerLog, "Entering STANDBY state"))
	if !isMaster(fabricsim.SMGUID, 1)() {
		t.Fatal("a lower-priority OpenSM took the master's place")
	}
}

// logSays is whether the log at path has a line containing what.
func logSays(path, what string) func() bool {
	return func() bool {
		log, _ := os.ReadFile(path)
		return strings.Contains(string(log), what)
	}
}
