package manager

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// openFabricsStore is a migrated SQLite database serving cfg's fabrics, each
// by its physical networks and pkey_range; closed when the test ends.
func openFabricsStore(t *testing.T, cfg *config.Config) *store.DB {
	t.Helper()
	var fabrics []store.FabricRules
	for _, f := range cfg.Fabrics {
		fabrics = append(fabrics, store.FabricRules{Name: f.Name, Rules: store.Rules{PhysicalNetworks: f.PhysicalNetworks,
			KubernetesRange: f.UFMPKeys.PKeyRange, PKeysClients: pkeysClientRules(cfg, f.Name)}})
	}
	st, err := storeopen.OpenFabrics(t.Context(), config.EngineSQLite, filepath.Join(t.TempDir(), "afm.db"), true, fabrics,
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fabricsConf is a compute fabric (the default) and a storage fabric, each
// with its own pkeys API; %s are the default fabric's pkeys password, the
// storage fabric's check_interval and its pkeys password.
const fabricsConf = `[api]
token = s3cret-token-0123456789
physical_networks = ibnet
[opensm_conf]
guid = 0x0002c90300a00001
[ufm_pkeys]
username = ib-kubernetes
password = %s
pkey_range = 0x1000-0x1fff
[fabric:storage]
physical_networks = storage
config_dir = /var/lib/alternative-fabric-manager/opensm-storage
check_interval = %s
[fabric:storage:opensm_conf]
guid = 0x0002c90300b00001
[fabric:storage:ufm_pkeys]
username = ib-kubernetes-storage
password = %s
prefix = /storage/ufmRest
pkey_range = 0x2000-0x2fff
`

// pkeysWork says whether user and password open the pkeys API under prefix:
// ufm_version answers 200 or 401.
func pkeysWork(t *testing.T, url, prefix, user, password string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", url+prefix+"/app/ufm_version", nil)
	req.SetBasicAuth(user, password)
	return statusCode(t, req) == http.StatusOK
}

// TestPKeysAPIsOfEveryFabric: the manager wires each fabric's pkeys API under
// its prefix with its credentials, and refuses to serve one its store has no
// view of.
func TestPKeysAPIsOfEveryFabric(t *testing.T) {
	const computePassword, storagePassword = "s3cret-compute-password", "s3cret-storage-password"
	path := filepath.Join(t.TempDir(), "afm.conf")
	writeConfText(t, path, fmt.Sprintf(fabricsConf, computePassword, "30", storagePassword))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	web, _, _ := hangupServer(t, path, cfg)
	for _, c := range []struct {
		prefix, user, password string
		want                   bool
	}{
		{"/ufmRest", "ib-kubernetes", computePassword, true},
		{"/storage/ufmRest", "ib-kubernetes-storage", storagePassword, true},
		{"/ufmRest", "ib-kubernetes-storage", storagePassword, false},
		{"/storage/ufmRest", "ib-kubernetes", computePassword, false},
	} {
		if got := pkeysWork(t, web.URL, c.prefix, c.user, c.password); got != c.want {
			t.Errorf("%s with %s's credentials: works %t, want %t", c.prefix, c.user, got, c.want)
		}
	}

	// A store that serves only the default fabric: the storage fabric's API
	// would record in no fabric of its own.
	one := storeOfDefaultOnly(t)
	if _, _, err := pkeysAPIs(cfg, one, 0, testVersion); err == nil || !strings.Contains(err.Error(), "[fabric:storage:ufm_pkeys]") {
		t.Errorf("pkeysAPIs on a store without the storage fabric: %v, want an error naming its section", err)
	}
}

func writeConfText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// storeOfDefaultOnly is a database that serves the default fabric alone.
func storeOfDefaultOnly(t *testing.T) *store.DB {
	t.Helper()
	cfg := config.Default()
	return openFabricsStore(t, &cfg)
}

// testVersion is the version the tests' pkeys APIs report.
const testVersion = "test"
