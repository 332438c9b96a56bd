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

// testTID numbers the tests' SMPs across their connections, as a manager's
// watch does.
var testTID atomic.Uint32

// startSM starts a real OpenSM on the k-th SM HCA of f with priority, in a
// directory of its own (log, partitions, cache), and returns its GUID and a
// function that stops it, and its log.
func startSM(t *testing.T, f *fabricsim.Fabric, k, priority int, smKey uint64) (fabric.GUID, func(), string) {
	t.Helper()
	return startSMWith(t, f, k, priority, smKey, "")
}

// startSMWith is startSM with more lines of opensm.conf (conf).
func startSMWith(t *testing.T, f *fabricsim.Fabric, k, priority int, smKey uint64, conf string) (fabric.GUID, func(), string) {
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
	confFile := filepath.Join(dir, "opensm.conf")
	write(t, confFile, fmt.Sprintf("log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 1\nsm_priority %d\nsm_key 0x%016x\n",
		priority, smKey)+conf)
	logFile := filepath.Join(dir, "opensm.log")
	cmd := exec.Command(opensm, "-F", confFile, "-g", guid.String(), "-P", partitions, "-f", logFile,
		"-d", "2", "--dump_files_dir", dir)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := os.Create(filepath.Join(dir, "opensm.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
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
	conn, lid := dialSMPort(t, d, f)
	defer conn.Close()
	return pkeyread.ReadMasters(ctx, conn, 0, &testTID, fabricsim.SMGUID, lid)
}

// TestReadMastersOnSimulatedFabric follows the masters through a second,
// real OpenSM: one of a higher priority and another SM_Key is found MASTER
// behind its port; once it stops, the own OpenSM is the only master; one of
// a lower priority stays STANDBY and the own OpenSM master.
func TestReadMastersOnSimulatedFabric(t *testing.T) {
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: 4, SMs: 3})
	_, _, ownLog := startSM(t, f, 1, 1, 1)
	waitFor(t, "the own OpenSM's SUBNET UP", logSays(ownLog, "SUBNET UP"))
	var last string // the last read, for a failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last ReadMasters: %s", last)
		}
	})
	// ownMaster: the own OpenSM says MASTER and no other SM does.
	ownMaster := func() bool {
		m, err := readMasters(t, f)
		last = fmt.Sprintf("%+v, %v", m, err)
		return err == nil && m.Own.GUID == fabricsim.SMGUID && m.Own.State == pkeyread.SMMaster && m.Own.Priority == 1 &&
			!slices.ContainsFunc(readSMs(t, f), func(sm pkeyread.SMInfo) bool {
				return sm.GUID != fabricsim.SMGUID && sm.State == pkeyread.SMMaster
			})
	}
	waitFor(t, "the own OpenSM master", ownMaster)
	if m, _ := readMasters(t, f); m.Master != m.Own || m.MasterLID != m.OwnLID {
		t.Fatalf("ReadMasters = %+v; want the own port's MasterSMLID to name its own SM", m)
	}
	// Another SM_Key: the two ignore each other and both sweep as MASTER
	// (with the same key OpenSM 3.3 on the simulator hands over, sweeps
	// side by side, or gets stuck with both STANDBY, by timing).
	foreign, stop, foreignLog := startSM(t, f, 2, 15, 2)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(foreignLog)
			out, _ := os.ReadFile(filepath.Join(filepath.Dir(foreignLog), "opensm.out"))
			t.Logf("the second OpenSM's log:\n%s\nits output:\n%s", log, out)
			lid, err := f.LID(foreign)
			t.Logf("its LID in the cache: %d %v", lid, err)
		}
	})
	waitFor(t, "the other OpenSM found MASTER behind its port", func() bool {
		m, err := readMasters(t, f)
		sms := readSMs(t, f)
		last = fmt.Sprintf("%+v, %v; ReadSMs %+v", m, err, sms)
		return err == nil && slices.ContainsFunc(sms, func(sm pkeyread.SMInfo) bool {
			return sm.GUID == foreign && sm.Priority == 15 && sm.State == pkeyread.SMMaster
		})
	})
	stop()
	waitFor(t, "the own OpenSM master again", ownMaster)
	if got := readSMs(t, f); len(got) != 1 || got[0].GUID != fabricsim.SMGUID || got[0].State != pkeyread.SMMaster {
		t.Fatalf("ReadSMs = %+v; want only the own OpenSM, MASTER", got)
	}
	lower, _, lowerLog := startSM(t, f, 3, 0, 1)
	waitFor(t, "the lower-priority OpenSM to go STANDBY", logSays(lowerLog, "Entering STANDBY state"))
	if !ownMaster() {
		t.Fatal("a lower-priority OpenSM took the master's place")
	}
	// The STANDBY one is found when its SMInfo answers (the simulator loses
	// an answer of an SM now and then: a port unread); never as MASTER.
	for _, sm := range readSMs(t, f) {
		if sm.GUID == lower && sm.State != pkeyread.SMStandby || sm.GUID != lower && sm.GUID != fabricsim.SMGUID {
			t.Fatalf("ReadSMs found %+v; want the own OpenSM MASTER and %s STANDBY", sm, lower)
		}
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
	// An SM starting has IsSM set before it answers SMInfo: that port is
	// unread, and the callers wait or assert on the SMs found.
	sms, _ := pkeyread.ReadSMs(t.Context(), conn, 0, &testTID, ports, time.Second)
	return sms
}

// logSays is whether the log at path has a line containing what.
func logSays(path, what string) func() bool {
	return func() bool {
		log, _ := os.ReadFile(path)
		return strings.Contains(string(log), what)
	}
}

// BenchmarkReadSMs is the second-SM check's scan (ReadSMs: PortInfo of every
// host port, SMInfo of the SMs found) on one connection, on a simulated
// fabric of 4, 100 and 1,000 hosts with a real OpenSM; ms/port is the
// figure to compare.
func BenchmarkReadSMs(b *testing.B) {
	for _, size := range []struct{ hosts, switches int }{{4, 1}, {100, 4}, {1000, 16}} {
		f := sweptFabric(b, size.hosts, size.switches)
		ports := []pkeyread.PortLID{}
		for _, tg := range targets(b, f) {
			ports = append(ports, pkeyread.PortLID{Port: tg.Port, LID: tg.LID})
		}
		lid, err := f.LID(f.SMGUID)
		if err != nil {
			b.Fatal(err)
		}
		ports = append(ports, pkeyread.PortLID{Port: f.SMGUID, LID: uint16(lid)})
		b.Run(fmt.Sprintf("hosts=%d", size.hosts), func(b *testing.B) {
			d, _ := pkeyread.SimDialerFromEnv(f.Env())
			conn, err := d.Dial(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			for b.Loop() {
				sms, unread := pkeyread.ReadSMs(b.Context(), conn, 0, &testTID, ports, time.Second)
				if unread != 0 || len(sms) != 1 {
					b.Fatalf("ReadSMs = %+v, %d unread; want the one OpenSM", sms, unread)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N*len(ports)), "ms/port")
		})
	}
}

// TestReadMastersWithKeys: a port that answers only the key it carries is
// read with the next key once the first gets no answer, and the key that
// answered is returned for the SMPs that follow; with no key it carries,
// the read fails.
func TestReadMastersWithKeys(t *testing.T) {
	const oldKey, newKey = 0x1111, 0x2222
	f := sweptFabric(t, 2, 1)
	d, ok := pkeyread.SimDialerFromEnv(f.Env())
	if !ok {
		t.Fatal("no simulator")
	}
	md := &mkeyDialer{Dialer: d}
	md.carried.Store(newKey)
	conn, lid := dialSMPort(t, md, f)
	defer conn.Close()
	m, key, err := pkeyread.ReadMastersWithKeys(t.Context(), conn, []uint64{oldKey, newKey}, &testTID, fabricsim.SMGUID, lid)
	if err != nil || key != newKey || m.Own.State != pkeyread.SMMaster {
		t.Fatalf("with the old key, then the new: %+v, key %#x, %v; want the master read with %#x", m, key, err, newKey)
	}
	if _, _, err := pkeyread.ReadMastersWithKeys(t.Context(), conn, []uint64{oldKey}, &testTID, fabricsim.SMGUID, lid); err == nil {
		t.Fatal("read with a key the port does not carry")
	}
}

// dialSMPort connects through d and returns the connection, which the caller
// closes (the simulator serves ten clients), and the LID of the SM's port,
// which the SMInfo reads address.
func dialSMPort(t *testing.T, d pkeyread.Dialer, f *fabricsim.Fabric) (pkeyread.Conn, uint16) {
	t.Helper()
	conn, err := d.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lid, err := f.LID(fabricsim.SMGUID)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return conn, uint16(lid)
}
