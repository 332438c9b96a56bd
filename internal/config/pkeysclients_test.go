package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestPKeysClientsParse reads [ufm_pkeys:NAME] sections: each client's keys,
// the defaults of [ufm_pkeys] for those it leaves out, and its fabric.
func TestPKeysClientsParse(t *testing.T) {
	c := parseFile(t, filepath.Join("testdata", "principals", "valid", "two-clients.conf"))
	if len(c.PKeysClients) != 2 {
		t.Fatalf("%d clients, want 2", len(c.PKeysClients))
	}
	nico, slurm := c.PKeysClients[0], c.PKeysClients[1]
	want := PKeysClient{Name: "nico", Fabric: DefaultFabric, Token: "s3cret-nico-token-long",
		PreviousTokens: []string{"s3cret-nico-old-token"}, DeleteEmpty: true, SMConf: true,
		UFMPKeys: UFMPKeys{Prefix: "/ufmRestV3", PKeyRange: fabric.PKeyRange{First: 0x2000, Last: 0x2fff},
			ApplyTimeout: 30 * time.Second, MaxGUIDsPerRequest: DefaultMaxGUIDsPerRequest,
			MaxMembersPerPKey: DefaultMaxMembersPerPKey, MaxMembers: DefaultMaxMembers,
			MaxConcurrentRequests: DefaultMaxConcurrentRequests,
			Quota:                 Quota{MaxStoredRequestBytes: DefaultPKeysMaxStoredRequestBytes, MaxJobsPerMinute: DefaultPKeysMaxJobsPerMinute}}}
	if !reflect.DeepEqual(nico, want) {
		t.Errorf("nico:\n got %+v\nwant %+v", nico, want)
	}
	if slurm.Username != "slurm" || slurm.Token != "" || slurm.Prefix != "/ufmRest" || slurm.DeleteEmpty || slurm.SMConf ||
		slurm.MaxGUIDsPerRequest != 100 {
		t.Errorf("slurm: %+v", slurm)
	}
	if got := c.PKeysClientsOf(DefaultFabric); len(got) != 2 {
		t.Errorf("PKeysClientsOf(default): %d clients, want 2", len(got))
	}
	if err := c.CheckToken(); err != nil {
		t.Errorf("CheckToken: %v", err)
	}
}

// TestPKeysClientsPerFabric: a range is its fabric's, so that clients of two
// fabrics may hold the same one.
func TestPKeysClientsPerFabric(t *testing.T) {
	c := parseFile(t, filepath.Join("testdata", "principals", "valid", "per-fabric.conf"))
	if got := c.PKeysClientsOf("storage"); len(got) != 1 || got[0].Name != "storage-slurm" {
		t.Errorf("clients of storage: %+v", got)
	}
}

// TestPKeysClientsInvalid reads each fixture of testdata/principals/invalid:
// its "# want:" lines are in the error, and no secret is.
func TestPKeysClientsInvalid(t *testing.T) {
	checkInvalidFixtures(t, filepath.Join("testdata", "principals", "invalid"), false)
}

// TestPKeysClientShortSecret: a client's token is held to [api] token's
// length, when the manager starts serving (and at SIGHUP).
func TestPKeysClientShortSecret(t *testing.T) {
	text := "[api]\ntoken = s3cret-token-long-enough\n[ufm_pkeys:a]\ntoken = s3cret-short\npkey_range = 0x2000-0x2fff\n"
	c, err := Parse(strings.NewReader(text), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckToken()
	if err == nil || !strings.Contains(err.Error(), "[ufm_pkeys:a] token") || strings.Contains(err.Error(), secretMarker) {
		t.Errorf("CheckToken: %v, want [ufm_pkeys:a] token refused without its value", err)
	}
}

// TestPKeysClientsDiff names a client's changed keys, and a client added.
func TestPKeysClientsDiff(t *testing.T) {
	a := parseFile(t, filepath.Join("testdata", "principals", "valid", "two-clients.conf"))
	b := parseFile(t, filepath.Join("testdata", "principals", "valid", "two-clients.conf"))
	b.PKeysClients[0].Token = "s3cret-another-token"
	b.PKeysClients[1].PKeyRange.Last = 0x0ffe
	b.PKeysClients = append(b.PKeysClients, PKeysClient{Name: "tool"})
	got := Diff(a, b)
	want := []string{"[ufm_pkeys:nico] token", "[ufm_pkeys:slurm] pkey_range", "[ufm_pkeys:tool]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff: %q, want %q", got, want)
	}
}
