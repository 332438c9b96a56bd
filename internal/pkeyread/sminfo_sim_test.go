package pkeyread_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	var last string // the last read, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last ReadMasters: %s", last)
		}
	})
	isMaster := func(guid fabric.GUID, priority uint8) func() bool {
		return func() bool {
			m, err := readMasters(t, f)
			last = fmt.Sprintf("%+v, %v", m, err)
			return err == nil && m.Master.GUID == guid && m.Master.State == pkeyread.SMMaster && m.Master.Priority == priority &&
				m.Own.GUID == fabricsim.SMGUID && (guid == fabricsim.SMGUID) == (m.Own.State == pkeyread.SMMaster)
		}
	}
	waitFor(t, "the own OpenSM named master", isMaster(fabricsim.SMGUID, 1))
	foreign, stop, _ := startSM(t, f, 2, 15)
	// The own OpenSM hands the subnet over: it goes STANDBY, and the other
	// is MASTER behind its port (the own port's MasterSMLID names it once
	// the new master has swept it).
	waitFor(t, "the higher-priority OpenSM MASTER, the own one not", func() bool {
		m, err := readMasters(t, f)
		last = fmt.Sprintf("%+v, %v", m, err)
		return err == nil && m.Own.State != pkeyread.SMMaster &&
			slices.ContainsFunc(readSMs(t, f), func(sm pkeyread.SMInfo) bool {
				return sm.GUID == foreign && sm.State == pkeyread.SMMaster && sm.Priority == 15
			})
	})
	stop()
	waitFor(t, "the own OpenSM named master again", isMaster(fabricsim.SMGUID, 1))
	if got := readSMs(t, f); len(got) != 1 || got[0].GUID != fabricsim.SMGUID || got[0].State != pkeyread.SMMaster {
		t.Fatalf("ReadSMs = %+v; want only the own OpenSM, MASTER", got)
	}
	lower, _, lowerLog := startSM(t, f, 3, 0)
	waitFor(t, "the lower-priority OpenSM to go STANDBY", logSays(lowerLog, "Entering STANDBY state"))
	if !isMaster(fabricsim.SMGUID, 1)() {
		t.Fatal("a lower-priority OpenSM took the master's place")
	}
	got := readSMs(t, f)
	if len(got) != 2 || got[0].GUID != fabricsim.SMGUID || got[0].State != pkeyread.SMMaster ||
		got[1].GUID != lower || got[1].State != pkeyread.SMStandby {
		t.Fatalf("ReadSMs = %+v; want the own OpenSM MASTER and %s STANDBY", got, lower)
	}
}

// readSMs reads the SMs behind the SM HCAs' ports and the hosts', by the
// LIDs in OpenSM's cache.
func readSMs(t *testing.T, f *fabricsim.Fabric) []pkeyread.SMInfo {
	t.Helper()
	var ports []pkeyread.PortLID
	for _, g := range []fabric.GUID{fabricsim.SMGUID, fabricsim.ExtraSMGUID(2), fabricsim.ExtraSMGUID(3), f.Hosts[0].PortGUID} {
		lid, err := f.LID(g)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, pkeyread.PortLID{Port: g, LID: uint16(lid)})
	}
	d, _ := pkeyread.SimDialerFromEnv(f.Env())
	conn, err := d.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var tid atomic.Uint32
	sms, unread := pkeyread.ReadSMs(t.Context(), conn, 0, &tid, ports, time.Second)
	if unread != 0 {
		t.Fatalf("ReadSMs: %d ports unread", unread)
	}
	return sms
}

// logSays is whether the log at path has a line containing what.
func logSays(path, what string) func() bool {
	return func() bool {
		log, _ := os.ReadFile(path)
		return strings.Contains(string(log), what)
	}
}
