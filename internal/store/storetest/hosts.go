package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The hosts an operator confirmed (confirmed_hosts, --confirm-hosts).
func init() {
	fabricTests = append(fabricTests,
		storeTest{"ConfirmHostsReplacesTheSet", testConfirmHosts},
		storeTest{"ConfirmHostsRefusals", testConfirmHostsRefusals},
		storeTest{"ConcurrentConfirmHostsLeaveOneSet", testConcurrentConfirmHosts})
	twoFabricTests = append(twoFabricTests, storeTest{"ConfirmedHostsOfEachFabric", testConfirmedHostsOfEachFabric})
}

var (
	hostA1 = store.ConfirmedHost{GUID: 0x0002c90300000101, Name: "node01", Description: "node01 mlx5_0"}
	hostA2 = store.ConfirmedHost{GUID: 0x0002c90300000102, Name: "node01", Description: "node01 mlx5_1"}
	hostB  = store.ConfirmedHost{GUID: 0x0002c90300000201, Name: "node02", Description: "node02 mlx5_0"}
	hostC  = store.ConfirmedHost{GUID: 0x0002c90300000301, Name: "gpu-7.rack_2", Description: "gpu-7.rack_2 \"HCA-1\""}
)

func confirmedHosts(t *testing.T, s *store.Store) []store.ConfirmedHost {
	t.Helper()
	got, err := s.ConfirmedHosts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sameHosts says whether got holds want's ports, names and descriptions, in
// want's order.
func sameHosts(got, want []store.ConfirmedHost) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].GUID != want[i].GUID || got[i].Name != want[i].Name || got[i].Description != want[i].Description {
			return false
		}
	}
	return true
}

func testConfirmHosts(t *testing.T, s *store.Store) {
	if got := confirmedHosts(t, s); len(got) != 0 {
		t.Fatalf("new database has confirmed hosts %v", got)
	}
	before := time.Now().UTC().Add(-time.Second)
	if err := s.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostB, hostA2, hostA1}); err != nil {
		t.Fatal(err)
	}
	// Read by name, then GUID: a host's ports together.
	got := confirmedHosts(t, s)
	if want := []store.ConfirmedHost{hostA1, hostA2, hostB}; !sameHosts(got, want) {
		t.Fatalf("after confirming node01 (two ports) and node02: %+v, want %+v", got, want)
	}
	if at := got[0].ConfirmedAt; at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("ConfirmedAt %v is not now", at)
	}
	// A second confirmation replaces the set: node01 is gone.
	if err := s.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostC, hostB}); err != nil {
		t.Fatal(err)
	}
	if got, want := confirmedHosts(t, s), []store.ConfirmedHost{hostC, hostB}; !sameHosts(got, want) {
		t.Fatalf("after confirming gpu-7.rack_2 and node02: %+v, want %+v", got, want)
	}
}

func testConfirmHostsRefusals(t *testing.T, s *store.Store) {
	if err := s.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostA1, hostB}); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name    string
		hosts   []store.ConfirmedHost
		wantErr string
	}{
		{"none", nil, "no host given"},
		{"twice", []store.ConfirmedHost{hostA1, hostA1}, "given twice"},
		{"zero GUID", []store.ConfirmedHost{hostA1, {GUID: 0, Name: "x", Description: "x"}}, "non-zero GUID"},
		{"empty name", []store.ConfirmedHost{{GUID: 9, Name: "", Description: " mlx5_0"}}, "want 1 to 63"},
		{"long name", []store.ConfirmedHost{{GUID: 9, Name: strings.Repeat("n", 64), Description: "x"}}, "want 1 to 63"},
		{"hostlist's bracket", []store.ConfirmedHost{{GUID: 9, Name: "node[1-2]", Description: "node[1-2]"}}, "only letters"},
		{"comma", []store.ConfirmedHost{{GUID: 9, Name: "a,b", Description: "a,b"}}, "only letters"},
		{"control character", []store.ConfirmedHost{{GUID: 9, Name: "a\x1b[2J", Description: "a"}}, "only letters"},
		{"long description", []store.ConfirmedHost{{GUID: 9, Name: "n", Description: strings.Repeat("d", 256)}}, "at most 255"},
		{"invalid UTF-8", []store.ConfirmedHost{{GUID: 9, Name: "n", Description: "n \xff"}}, "at most 255"},
	}
	for _, tc := range bad {
		if err := s.ConfirmHosts(t.Context(), tc.hosts); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
		}
	}
	if got, want := confirmedHosts(t, s), []store.ConfirmedHost{hostA1, hostB}; !sameHosts(got, want) {
		t.Errorf("refused confirmations changed the set: %+v, want %+v", got, want)
	}
}

// testConfirmedHostsOfEachFabric: a fabric's confirmation replaces its own
// hosts alone, and a port GUID may be confirmed on each fabric.
func testConfirmedHostsOfEachFabric(t *testing.T, s *store.Store) {
	storage := s.DB().Fabric(storageFabric)
	if err := s.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostA1, hostB}); err != nil {
		t.Fatal(err)
	}
	if err := storage.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostB, hostC}); err != nil {
		t.Fatal(err)
	}
	if err := storage.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostC}); err != nil {
		t.Fatal(err)
	}
	if got, want := confirmedHosts(t, s), []store.ConfirmedHost{hostA1, hostB}; !sameHosts(got, want) {
		t.Errorf("default fabric's hosts after the storage fabric's confirmations: %+v, want %+v", got, want)
	}
	if got, want := confirmedHosts(t, storage), []store.ConfirmedHost{hostC}; !sameHosts(got, want) {
		t.Errorf("storage fabric's hosts: %+v, want %+v", got, want)
	}
}

// testConcurrentConfirmHosts: two operators confirming at once leave one of
// their sets whole, never a mix; one may fail (and can run again).
func testConcurrentConfirmHosts(t *testing.T, s *store.Store) {
	sets := [2][]store.ConfirmedHost{{hostA1, hostA2, hostB}, {hostC, hostB}}
	for round := range 5 {
		var wg sync.WaitGroup
		var errs [2]error
		for i := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.ConfirmHosts(t.Context(), sets[i])
			}()
		}
		wg.Wait()
		if errs[0] != nil && errs[1] != nil {
			t.Fatalf("round %d: both confirmations failed: %v; %v", round, errs[0], errs[1])
		}
		got := confirmedHosts(t, s)
		want0 := []store.ConfirmedHost{hostA1, hostA2, hostB}
		want1 := []store.ConfirmedHost{hostC, hostB}
		if !sameHosts(got, want0) && !sameHosts(got, want1) {
			t.Fatalf("round %d: confirmed hosts %+v are neither set (errors %v, %v)", round, got, errs[0], errs[1])
		}
	}
}
