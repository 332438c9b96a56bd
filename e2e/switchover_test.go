package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// TestSwitchOver: a fabric that another manager ran (its OpenSM reading a
// UFM-style partitions file with tenant partitions, and M_Key, SM_Key and
// SA_Key of its own) is taken over by this manager with an empty database
// after --import-keys and --adopt-partitions of that manager's files. The
// tenant ports' pkey tables are read every 100 ms throughout: no tenant port
// ever loses its pkey. Then networking-mlnx sends the networks and ports, one
// at a time, as it would: every adopted partition ends owned, and
// --release-adopted removes the member no port owns from the tables.
func TestSwitchOver(t *testing.T) {
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: 5})
	h := func(i int) fabric.GUID { return f.Host(fmt.Sprintf("H%d", i)).PortGUID }
	old := startOldManager(t, f, h)
	tenants := old.tenants
	running, oldConf, oldKeys := old.partitions, old.conf, old.keys

	s := sampleTenants(t, f, tenants)
	m := launchManager(t, storetest.NewDatabase(t, "sqlite"), fabricsim.Options{}, settings{Fabric: f,
		BeforeStart: func(m *manager) {
			m.operator("--migrate")
			if out := m.operator("--import-keys", oldConf); strings.Count(out, "imported from") != 3 {
				t.Fatalf("--import-keys printed %q", out)
			}
			out := m.operator("--adopt-partitions", running)
			if !strings.Contains(out, "adopted at revision 1") {
				t.Fatalf("--adopt-partitions printed %q", out)
			}
			// The old manager's OpenSM stops; the tables stay as it left them.
			old.stop()
		}})
	m.confirmSwitches()
	m.waitRecordedApplied()

	// The manager's OpenSM runs with the old manager's keys.
	m.wantOpenSMConfKeys(oldKeys)
	waitFor(t, "a trusted SA query with the old manager's SA_Key", func() bool { return m.trustedSAQuery(oldKeys["sa_key"]) })

	// networking-mlnx sends each network, then its ports, one at a time.
	nets := map[uint16]string{0x10: "5d0c1b7a-0010-4e6f-8a9b-0c1d2e3f4a5b", 0x20: "5d0c1b7a-0020-4e6f-8a9b-0c1d2e3f4a5b"}
	for _, pkey := range []uint16{0x10, 0x20} {
		m.waitCompleted(m.accept("POST", "/cloudx/Network", vlanNetworkBody(nets[pkey], int(pkey))), nil)
	}
	for i := 1; i <= 4; i++ {
		port := fmt.Sprintf("7e1f2a3b-000%d-4c5d-8e9f-0a1b2c3d4e5f", i)
		m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody(port, nets[tenants[h(i)]], vendorClientID(h(i)))), nil)
	}
	s.noLoss("through the switch-over and networking-mlnx's sends")
	adopted := m.adoptedStatus()
	if len(adopted) != 1 || adopted[0].PKey != "0x0020" || adopted[0].Owner != "network "+nets[0x20] ||
		len(adopted[0].Members) != 1 || adopted[0].Members[0].GUID != h(5).String() {
		t.Fatalf("after networking-mlnx sent everything, adopted = %+v: want only H5 left, in 0x0020, owned", adopted)
	}

	// H5, which no port owns, is released and leaves the tables.
	if out := m.operator("--release-adopted", "0x20"); !strings.Contains(out, h(5).String()) {
		t.Fatalf("--release-adopted printed %q", out)
	}
	delete(tenants, h(5))
	s.forget(h(5))
	waitFor(t, "H5 to lose 0x0020 once released", func() bool { return !hasPKey(f, t, h(5), 0x20) })
	if left := m.adoptedStatus(); len(left) != 0 {
		t.Errorf("adopted after the release: %+v", left)
	}
	s.noLoss("through the release")

	// Adopting the same file again while the manager runs and applies: the
	// ports keep their GUIDs (their owner decides), and H5, released, is
	// adopted again into the network's partition.
	out := m.operator("--adopt-partitions", running)
	if !strings.Contains(out, "member "+h(1).String()+" not adopted: port") || !strings.Contains(out, "adopted at revision") {
		t.Errorf("--adopt-partitions again printed %q", out)
	}
	waitFor(t, "H5 to hold 0x0020 again once adopted again", func() bool { return hasPKey(f, t, h(5), 0x20) })
	tenants[h(5)] = 0x20
	s.watch(h(5), 0x20)
	// A port of the network then takes H5 over: nothing is left adopted.
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("7e1f2a3b-0006-4c5d-8e9f-0a1b2c3d4e5f", nets[0x20],
		vendorClientID(h(5)))), nil)
	if left := m.adoptedStatus(); len(left) != 0 {
		t.Errorf("adopted once H5 is a port of network %s: %+v", nets[0x20], left)
	}
	s.noLoss("through the adoption again, beside a running manager")
	s.stop()
}

// oldManager is what the manager being replaced left running: its OpenSM,
// the partitions file it wrote, its opensm.conf with its keys, and the
// tenants' pkeys, which that OpenSM has programmed.
type oldManager struct {
	*oldOpenSM
	partitions, conf string
	keys             map[string]string
	tenants          map[fabric.GUID]uint16
}

// startOldManager starts the old manager's OpenSM on f and waits until the
// tenants hold their pkeys.
func startOldManager(t *testing.T, f *fabricsim.Fabric, h func(int) fabric.GUID) oldManager {
	t.Helper()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	// What the old manager wrote: H1, H2 full in 0x0010; H3 full, H4 limited
	// and H5 full in 0x0020 (H5 has no Neutron port: the operator releases it).
	running := filepath.Join(f.Dir, "running-partitions.conf")
	text := fmt.Sprintf(`Default=0x7fff, ipoib : ALL=limited, SELF=full ;
tenant_a=0x0010, ipoib, mtu=4 : %s=full, %s=full ;
tenant_b=0x0020, ipoib : %s=full, %s=limited, %s=full ;
`, h(1), h(2), h(3), h(4), h(5))
	if err := os.WriteFile(running, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// The old manager's keys, which the ports' M_Key protection and the SA's
	// trusted queries depend on: imported before the manager's first start.
	oldKeys := map[string]string{"m_key": "0x6a1b2c3d4e5f6071", "sm_key": "0x17263544536271a0", "sa_key": "0x2b3c4d5e6f708192"}
	oldConf := filepath.Join(f.Dir, "old-opensm.conf")
	conf := "m_key_protection_level 2\nm_key_lease_period 60\n"
	for _, k := range []string{"m_key", "sm_key", "sa_key"} {
		conf += k + " " + oldKeys[k] + "\n"
	}
	if err := os.WriteFile(oldConf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	old := startOldOpenSM(t, f, opensm, running, oldConf)
	tenants := map[fabric.GUID]uint16{h(1): 0x10, h(2): 0x10, h(3): 0x20, h(4): 0x20, h(5): 0x20}
	waitFor(t, "the old OpenSM to program the tenants' pkeys", func() bool {
		for g, pkey := range tenants {
			if !hasPKey(f, t, g, pkey) {
				return false
			}
		}
		return true
	})
	return oldManager{oldOpenSM: old, partitions: running, conf: oldConf, keys: oldKeys, tenants: tenants}
}

// waitRecordedApplied waits until --status says the recorded revision was
// applied.
func (m *manager) waitRecordedApplied() {
	m.t.Helper()
	waitUntil(m.t, "the manager's first apply of the recorded revision", func() (bool, error) {
		var st struct {
			Revision  int64 `json:"revision"`
			LastApply *struct {
				Revision int64  `json:"revision"`
				Outcome  string `json:"outcome"`
			} `json:"last_apply"`
		}
		out := m.operator("--status", "--json")
		err := json.Unmarshal([]byte(out), &st)
		return err == nil && st.LastApply != nil && st.LastApply.Revision == st.Revision && st.LastApply.Outcome == "applied",
			fmt.Errorf("--status --json: %s (%v)", out, err)
	})

}

// oldOpenSM is the OpenSM of the manager being replaced.
type oldOpenSM struct {
	cmd  *exec.Cmd
	once sync.Once
}

func (o *oldOpenSM) stop() {
	o.once.Do(func() {
		o.cmd.Process.Kill()
		o.cmd.Wait()
	})
}

// startOldOpenSM runs OpenSM on the fabric's SM port with partitions and the
// options file conf, as the manager being replaced did, until it has brought
// the subnet up.
func startOldOpenSM(t *testing.T, f *fabricsim.Fabric, opensm, partitions, conf string) *oldOpenSM {
	t.Helper()
	logFile := filepath.Join(f.Dir, "old-opensm.log")
	cmd := exec.Command(opensm, "-F", conf, "-g", f.SMGUID.String(), "-P", partitions, "-f", logFile, "-d", "2")
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), f.Env()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &oldOpenSM{cmd: cmd}
	t.Cleanup(o.stop) // before the fabric stops (clean-ups run last first)
	waitFor(t, "the old OpenSM to bring the subnet up", func() bool {
		log, _ := os.ReadFile(logFile)
		return strings.Contains(string(log), "-> SUBNET UP\n")
	})
	return o
}

// hasPKey says whether port's table holds pkey, as a full or a limited
// member; a table that cannot be read does not.
func hasPKey(f *fabricsim.Fabric, t *testing.T, port fabric.GUID, pkey uint16) bool {
	keys, err := f.PKeys(t.Context(), port)
	return err == nil && hasEither(keys, pkey)
}

// hasEither says whether keys hold pkey with either membership.
func hasEither(keys []uint16, pkey uint16) bool {
	for _, k := range keys {
		if k&0x7fff == pkey {
			return true
		}
	}
	return false
}

// sampleEvery is how often the sampler reads the tenants' tables: a read is
// a few SMPs in this process, and a manager on the simulated fabric applies a
// change in about 10 ms, so a slower sampler sees a whole step in a handful of
// reads.
const sampleEvery = 20 * time.Millisecond

// minSamples is how many tables the sampler must have read for a step to
// count as watched.
const minSamples = 20

// sampler reads the tenants' pkey tables every sampleEvery and keeps every
// sample that lacks a tenant's pkey.
type sampler struct {
	mu      sync.Mutex
	tenants map[fabric.GUID]uint16
	reads   int
	losses  []string
	done    chan struct{}
	stopped chan struct{}
	t       *testing.T
}

func sampleTenants(t *testing.T, f *fabricsim.Fabric, tenants map[fabric.GUID]uint16) *sampler {
	s := &sampler{tenants: map[fabric.GUID]uint16{}, done: make(chan struct{}), stopped: make(chan struct{}), t: t}
	for g, p := range tenants {
		s.tenants[g] = p
	}
	go func() {
		defer close(s.stopped)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
			s.mu.Lock()
			for g, pkey := range s.tenants {
				keys, err := f.PKeys(t.Context(), g)
				if err != nil {
					continue // no LID yet, or a MAD lost: not a sample
				}
				s.reads++
				if !hasEither(keys, pkey) {
					s.losses = append(s.losses, fmt.Sprintf("%s: %s lacks 0x%04x (table %s)",
						time.Now().Format("15:04:05.000"), g, pkey, hex(keys)))
				}
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.halt() })
	return s
}

// forget stops watching port, which is about to lose its pkey on purpose.
func (s *sampler) forget(port fabric.GUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tenants, port)
}

func (s *sampler) halt() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	<-s.stopped
}

// noLoss fails the test if a tenant lost its pkey in a sample so far, or
// if too few samples were read to tell: it first lets the sampler read the
// state the step left (a step may take less time than minSamples reads),
// for at most a few seconds, so that only reads that fail make it too few.
func (s *sampler) noLoss(when string) {
	s.t.Helper()
	// Too few reads after the wait are the failure below.
	_ = testenv.Poll(5*time.Second, sampleEvery, func() (bool, error) { return s.readSoFar() >= minSamples, nil })
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.losses) > 0 {
		s.t.Errorf("%s: %d samples of %d lack a tenant's pkey:\n%s", when, len(s.losses), s.reads, strings.Join(s.losses, "\n"))
		s.losses = nil
	}
	if s.reads < minSamples {
		s.t.Errorf("%s: only %d table reads succeeded: the switch-over was not watched", when, s.reads)
	}
	s.t.Logf("%s: %d table reads, every %s", when, s.reads, sampleEvery)
}

// readSoFar is how many tables the sampler has read.
func (s *sampler) readSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// watch starts (or changes) the watch of port's pkey.
func (s *sampler) watch(port fabric.GUID, pkey uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants[port] = pkey
}

// stop ends the sampling.
func (s *sampler) stop() { s.halt() }

// adoptedEntry is one element of --status --json's adopted.
type adoptedEntry struct {
	PKey    string `json:"pkey"`
	Owner   string `json:"owner"`
	Members []struct {
		GUID string `json:"guid"`
	} `json:"members"`
}

func (m *manager) adoptedStatus() []adoptedEntry {
	m.t.Helper()
	var s struct {
		Adopted []adoptedEntry `json:"adopted"`
	}
	if err := json.Unmarshal([]byte(m.operator("--status", "--json")), &s); err != nil {
		m.t.Fatal(err)
	}
	return s.Adopted
}
