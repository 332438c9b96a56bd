package e2e

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// OpenSM's log at every log_flags bit the manager lets through (0xd7: ERROR,
// INFO, VERBOSE, FUNCS, ROUTING, SYS; DEBUG and FRAMES, which print MADs'
// contents, are refused) holds none of the three keys, in any form OpenSM
// prints a 64-bit number in, after a start, sweeps, and partition changes
// that set pkey tables (and, with an M_Key, send it in every Set) on the
// simulated fabric. The log is checked to be the one OpenSM wrote (it names
// the hosts' port GUIDs), so an empty or wrong file cannot pass.
func TestNoKeyInOpenSMLogAtTheAllowedFlags(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricsim.Options{Hosts: 4}, settings{OpenSMConf: []string{"log_flags = 0xd7"}})
	m.confirmSwitches()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	for i := 1; i <= 2; i++ {
		h := m.fabric.Host(fmt.Sprintf("H%d", i)).PortGUID
		m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody(fmt.Sprintf("port-%d", i), netID, vendorClientID(h))), nil)
	}
	raw, err := os.ReadFile(filepath.Join(m.dir, "opensm", "opensm.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := strings.ToLower(string(raw))
	if h1 := fmt.Sprintf("%016x", uint64(m.fabric.Host("H1").PortGUID)); !strings.Contains(log, h1) {
		t.Fatalf("OpenSM's log (%d bytes) never names H1's port GUID %s: not the log of this fabric", len(raw), h1)
	}
	keys := secrets(t, db)
	for _, name := range []string{"m_key", "sm_key", "sa_key"} {
		k, err := strconv.ParseUint(strings.TrimPrefix(keys[name], "0x"), 16, 64)
		if err != nil || k == 0 {
			t.Fatalf("recorded %s %q: %v", name, keys[name], err)
		}
		for _, form := range keyForms(k) {
			if strings.Contains(log, form) {
				t.Errorf("OpenSM's log at log_flags 0xd7 holds the %s (as %q)", name, form)
			}
		}
	}
}

// keyForms are the ways a 64-bit key can stand in a log: hexadecimal with
// and without leading zeros, in host and network byte order, and decimal.
func keyForms(k uint64) []string {
	var forms []string
	for _, v := range []uint64{k, bits.ReverseBytes64(k)} {
		forms = append(forms, fmt.Sprintf("%016x", v), fmt.Sprintf("%x", v), strconv.FormatUint(v, 10))
	}
	return forms
}
