package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestEmptyPartitionsLeaveOpenSMsSADatabaseAlone: networks no port is bound
// to, and the flat partition of a cloud without flat ports, cost OpenSM
// nothing at a sweep. Written with the ipoib flag, OpenSM created each one's
// IPoIB group and dropped it with the empty partition in the same pass, at
// every heavy sweep, and so rewrote and fsynced its SA database
// (opensm-sa.dump) after every sweep, while the manager read its ports back
// and committed its jobs. Here, once a bound port's partition has its group,
// a further change's sweep leaves the SA database's file as it was.
func TestEmptyPartitionsLeaveOpenSMsSADatabaseAlone(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, "sqlite"), 2)
	h1 := m.fabric.Host("H1").PortGUID
	const bound = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	emptyNetwork := func(vlan int) {
		id := fmt.Sprintf("5d1e7a90-2b3c-4d5e-8f60-%012d", vlan)
		m.waitCompleted(m.accept("POST", "/cloudx/Network", vlanNetworkBody(id, vlan)), nil)
	}
	emptyNetwork(102)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", vlanNetworkBody(bound, 101)), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", bound,
		vendorClientID(h1))), nil)
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Fatalf("H1's table is %s: want 0x8065", hex(got))
	}
	// OpenSM writes the SA database after a sweep's SUBNET UP, which the job
	// may beat; its next sweep starts only once that is done. So the file
	// is read after a further change's sweep: the bound partition's group,
	// created at the port's sweep, has been written by then.
	emptyNetwork(103)
	dump := filepath.Join(m.dir, "opensm", "opensm-sa.dump")
	before := fileIdentity(t, dump)
	emptyNetwork(104) // its sweep starts after the file was read
	emptyNetwork(105) // and ends, written or not, before this one's starts
	if after := fileIdentity(t, dump); after != before {
		t.Errorf("OpenSM rewrote its SA database at sweeps that changed no multicast group (%+v, was %+v): "+
			"an empty partition is written with the ipoib flag", after, before)
	}
}

// identity is what tells a file rewritten by rename from the same file.
type identity struct {
	Inode   uint64
	ModTime int64
}

func fileIdentity(t *testing.T, path string) identity {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return identity{Inode: fi.Sys().(*syscall.Stat_t).Ino, ModTime: fi.ModTime().UnixNano()}
}
