package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

func parseFile(t *testing.T, path string) *Config {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(bytes.NewReader(text), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestParseFabrics: a further fabric holds what its sections set and the
// defaults of [opensm] and [ufm_pkeys] for the rest; the default fabric comes
// first and is the top-level settings.
func TestParseFabrics(t *testing.T) {
	c := parseFile(t, filepath.Join("testdata", "fabrics", "valid", "compute-storage.conf"))
	storage := Fabric{
		Name:             "storage",
		PhysicalNetworks: []string{"storage"},
		OpenSM: OpenSM{
			Driver: "process", Container: "opensm", ManagerContainer: "alternative-fabric-manager",
			Command:          []string{"opensm"},
			ConfigDir:        "/var/lib/alternative-fabric-manager/opensm-storage",
			LogFile:          "/var/lib/alternative-fabric-manager/opensm-storage/opensm.log",
			CheckInterval:    30 * time.Second,
			SweepTimeout:     60 * time.Second,
			FlatPKey:         0x7ffd,
			DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
			Hardening: opensm.Hardening{
				Groups:              []opensm.Group{"m_key", "default_partition", "enforcement", "sa_trust"},
				MKeyProtectionLevel: 2, MKeyLeasePeriod: 60,
			},
			SwitchPKeyCapacity: 32,
			Verify:             VerifyTables, VerifyTimeout: 60 * time.Second, AuditInterval: 300 * time.Second,
		},
		OpenSMConf: []KeyValue{{"guid", "0x0002c90300b00001"}, {"sm_priority", "14"}, {"sm_key", "0x0123456789abcdef"}},
		UFMPKeys: UFMPKeys{Username: "ib-kubernetes-storage", Password: "s3cret-storage-password",
			Prefix: "/storage/ufmRest", PKeyRange: fabric.PKeyRange{First: 0x2000, Last: 0x2fff},
			ApplyTimeout: 30 * time.Second, MaxGUIDsPerRequest: 10000, MaxMembersPerPKey: 50000,
			MaxMembers: 100000, MaxConcurrentRequests: 4,
			Quota: Quota{MaxStoredRequestBytes: DefaultPKeysMaxStoredRequestBytes, MaxJobsPerMinute: DefaultPKeysMaxJobsPerMinute}},
	}
	if len(c.Fabrics) != 2 || c.Fabrics[0].Name != DefaultFabric || !reflect.DeepEqual(c.Fabrics[1:], []Fabric{storage}) {
		t.Errorf("fabrics\n%#v\nwant the default fabric then\n%#v", c.Fabrics, []Fabric{storage})
	}
	if err := c.CheckToken(); err != nil {
		t.Errorf("CheckToken: %v", err)
	}
}

// TestParseFabricPKeysListen: a fabric's pkeys API on a listener of its own
// keeps the prefix ib-kubernetes sends, /ufmRest, which the default fabric's
// has too: the two share no listener, so they do not overlap.
func TestParseFabricPKeysListen(t *testing.T) {
	c := parseFile(t, filepath.Join("testdata", "fabrics", "valid", "pkeys-listen.conf"))
	if len(c.Fabrics) != 2 {
		t.Fatalf("fabrics %v, want the default fabric and storage", c.Fabrics)
	}
	u, def := c.Fabrics[1].UFMPKeys, c.Fabrics[0].UFMPKeys
	if u.Listen != "0.0.0.0:8091" || u.Prefix != "/ufmRest" || def.Prefix != "/ufmRest" || def.Listen != "" {
		t.Errorf("storage listen %q prefix %q, default prefix %q listen %q; want 0.0.0.0:8091, /ufmRest, /ufmRest, \"\"",
			u.Listen, u.Prefix, def.Prefix, def.Listen)
	}
	if !strings.Contains(c.String(), `ufm_pkeys_listen="0.0.0.0:8091"`) {
		t.Errorf("the printed configuration lacks the listener: %s", c)
	}
}

// TestSameListener: two addresses bind one port when their ports match on
// one host or on a host that is every address.
func TestSameListener(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:8091", "127.0.0.1:8091", true},
		{"0.0.0.0:8091", "10.0.0.5:8091", true},
		{":8091", "127.0.0.1:8091", true},
		{"[::]:8091", "127.0.0.1:8091", true},
		{"10.0.0.5:8091", "10.0.0.6:8091", false},
		{"127.0.0.1:8091", "127.0.0.1:8092", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		if got := sameListener(tt.a, tt.b); got != tt.want {
			t.Errorf("sameListener(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestSingleFabricFilesHaveOneFabric: a file without [fabric:NAME] sections
// configures the default fabric alone, from its top-level settings.
func TestSingleFabricFilesHaveOneFabric(t *testing.T) {
	for name, text := range singleFabricFiles(t) {
		c, err := Parse(strings.NewReader(text), name)
		if err != nil {
			t.Fatal(err)
		}
		if all := c.Fabrics; len(all) != 1 || all[0].Name != DefaultFabric {
			t.Errorf("%s: fabrics %v, want the default one alone", name, all)
		}
	}
}

// TestFabricErrors: each fixture holds one mistake, reported as one error
// that names both places it involves (its "# want: " lines), never a secret.
func TestFabricErrors(t *testing.T) {
	checkInvalidFixtures(t, filepath.Join("testdata", "fabrics", "invalid"), true)
}

// fabricBase is a valid two-fabric file whose [fabric:s] section ends it, so
// that a key can be appended to that section.
const fabricBase = `[api]
token = s3cret-token-0123456789
physical_networks = ibnet
[opensm_conf]
guid = 0x0002c90300a00001
[fabric:s:opensm_conf]
guid = 0x0002c90300a00002
[fabric:s]
physical_networks = storage
config_dir = /srv/storage
`

// TestFabricKeysAreOpenSMKeys: every key of [opensm] (and of [ufm_pkeys]) is
// a key of a fabric's section, read by the same field into the fabric's own
// settings: a key added to [opensm] reaches every fabric with no more code.
func TestFabricKeysAreOpenSMKeys(t *testing.T) {
	base, err := Parse(strings.NewReader(fabricBase), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range keyGetters {
		if g.section != "opensm" && g.section != "ufm_pkeys" {
			continue
		}
		value := diffChanges[g.name()]
		var text string
		if g.section == "opensm" {
			text = setLine(fabricBase, g.key, value)
		} else {
			// The keys diffBase's [ufm_pkeys] needs beside any other.
			pkeys := "username = ib-kubernetes\npassword = s3cret-password-0123456789\npkey_range = 0x1000-0x1fff\n"
			text = fabricBase + "[fabric:s:ufm_pkeys]\n" + setLine(pkeys, g.key, value)
		}
		c, err := Parse(strings.NewReader(text), "afm.conf")
		if err != nil {
			t.Errorf("%s in [fabric:s]: %v", g.name(), err)
			continue
		}
		top := withKey(t, g.name(), value)
		fab := Config{Fabrics: c.Fabrics[1:]}
		if !reflect.DeepEqual(g.get(&fab), g.get(top)) {
			t.Errorf("%s = %s: the fabric holds %v, [%s] would hold %v", g.key, value, g.get(&fab), g.section, g.get(top))
		}
		if reflect.DeepEqual(g.get(&fab), g.get(&Config{Fabrics: base.Fabrics[1:]})) &&
			g.section == "opensm" {
			t.Errorf("%s = %s did not change the fabric", g.key, value)
		}
		if !reflect.DeepEqual(c.Fabrics[0], base.Fabrics[0]) || !reflect.DeepEqual(c.API, base.API) {
			t.Errorf("%s in [fabric:s] changed the default fabric", g.key)
		}
	}
}

// TestDiffFabrics: a reload names an added or removed fabric by its section,
// and a fabric's changed key as its section writes it; none is a credential
// SIGHUP applies, so each is reported as needing a restart.
func TestDiffFabrics(t *testing.T) {
	parse := func(text string) *Config {
		t.Helper()
		c, err := Parse(strings.NewReader(text), "afm.conf")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	one := parse("[api]\ntoken = s3cret-token-0123456789\nphysical_networks = ibnet\n[opensm_conf]\nguid = 0x0002c90300a00001\n")
	two := parse(fabricBase)
	for _, tt := range []struct {
		name string
		a, b *Config
		want []string
	}{
		{"added", one, two, []string{"[fabric:s]"}},
		{"removed", two, one, []string{"[fabric:s]"}},
		{"a key", two, parse(fabricBase + "check_interval = 5\n"), []string{"[fabric:s] check_interval"}},
		{"physical networks", two, parse(strings.Replace(fabricBase, "= storage", "= storage,storage2", 1)),
			[]string{"[fabric:s] physical_networks"}},
		{"an option", two, parse(strings.Replace(fabricBase, "a00002\n", "a00002\nsm_priority = 3\n", 1)),
			[]string{"[fabric:s:opensm_conf] sm_priority"}},
		{"a pkeys listener", parse(fabricBase + "[fabric:s:ufm_pkeys]\nusername = k\npassword = s3cret-one\npkey_range = 0x1000-0x1fff\n"),
			parse(fabricBase + "[fabric:s:ufm_pkeys]\nusername = k\npassword = s3cret-one\npkey_range = 0x1000-0x1fff\nlisten = 127.0.0.1:8091\n"),
			[]string{"[fabric:s:ufm_pkeys] listen"}},
		{"a password", parse(fabricBase + "[fabric:s:ufm_pkeys]\nusername = k\npassword = s3cret-one\npkey_range = 0x1000-0x1fff\n"),
			parse(fabricBase + "[fabric:s:ufm_pkeys]\nusername = k\npassword = s3cret-two\npkey_range = 0x1000-0x1fff\n"),
			[]string{"[fabric:s:ufm_pkeys] password"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(tt.a, tt.b); !slices.Equal(got, tt.want) {
				t.Errorf("Diff = %q, want %q", got, tt.want)
			}
		})
	}
}

// setLine returns text, lines of "key = value", with key's line set to value,
// or with the line added at its end.
func setLine(text, key, value string) string {
	var out []string
	set := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, key+" =") {
			line, set = key+" = "+value+"\n", true
		}
		out = append(out, line)
	}
	if !set {
		out = append(out, key+" = "+value+"\n")
	}
	return strings.Join(out, "")
}

// TestFabricSecretsNeverPrinted: a further fabric's pkeys passwords and
// opensm.conf keys are masked wherever the configuration is printed, as the
// default fabric's are.
func TestFabricSecretsNeverPrinted(t *testing.T) {
	c := parseFile(t, filepath.Join("testdata", "fabrics", "valid", "compute-storage.conf"))
	c.Fabrics[1].UFMPKeys.PreviousPasswords = []string{"s3cret-previous-storage-password"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("starting", "config", c)
	outputs := map[string]string{
		"slog":       logged.String(),
		"fmt %v":     fmt.Sprintf("%v", c),
		"String":     c.String(),
		"Redacted()": fmt.Sprintf("%#v", c.Redacted()),
	}
	for how, out := range outputs {
		for _, secret := range []string{secretMarker, "0123456789abcdef"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows a secret: %s", how, out)
			}
		}
		if !strings.Contains(out, "opensm-storage") || !strings.Contains(out, "sm_priority") {
			t.Errorf("%s lacks the storage fabric's settings: %s", how, out)
		}
	}
	if c.Fabrics[1].UFMPKeys.Password != "s3cret-storage-password" || c.Fabrics[1].OpenSMConf[2].Value != "0x0123456789abcdef" {
		t.Error("Redacted changed the configuration it copied")
	}
}

// TestFabricsPhysicalNetworks: each fabric serves the physnets its section
// lists (the store routes a network by them: store's TestPhysnetRouting);
// a file without [api] physical_networks gives the default fabric every one.
func TestFabricsPhysicalNetworks(t *testing.T) {
	two := parseFile(t, filepath.Join("testdata", "fabrics", "valid", "compute-storage.conf"))
	one, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token\n"), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		c    *Config
		want map[string][]string
	}{
		{two, map[string][]string{DefaultFabric: {"ibnet", "ibnet-2"}, "storage": {"storage"}}},
		{one, map[string][]string{DefaultFabric: {"*"}}},
	} {
		got := map[string][]string{}
		for _, f := range tt.c.Fabrics {
			got[f.Name] = f.PhysicalNetworks
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("physical networks of each fabric = %v, want %v", got, tt.want)
		}
	}
}

// TestFabricPasswordLength: a fabric's pkeys password is held to the rule of
// [ufm_pkeys]'s, and its error names the fabric's section.
func TestFabricPasswordLength(t *testing.T) {
	c, err := Parse(strings.NewReader(fabricBase+"[fabric:s:ufm_pkeys]\nusername = k8s\npassword = s3cret\n"+
		"pkey_range = 0x1000-0x1fff\n"), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckToken()
	if err == nil || !strings.Contains(err.Error(), "[fabric:s:ufm_pkeys] password is 6 characters long") {
		t.Errorf("CheckToken: %v", err)
	}
}

// TestSampleFabricExample: the sample's [fabric:storage] example, uncommented
// beside a default fabric that lists its physnets and names its port, parses
// to a storage fabric.
func TestSampleFabricExample(t *testing.T) {
	sample := readSample(t)
	start := strings.Index(sample, "#   [fabric:storage]\n")
	if start < 0 {
		t.Fatal("the sample has no [fabric:storage] example")
	}
	var example strings.Builder
	for line := range strings.Lines(sample[start:]) {
		example.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), "   "))
	}
	text := "[api]\ntoken = s3cret-token-0123456789\nphysical_networks = ibnet\n[opensm_conf]\nguid = 0x0002c90300a00001\n" +
		strings.Replace(example.String(), "<another secret>", "s3cret-storage-password", 1)
	c, err := Parse(strings.NewReader(text), samplePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckToken(); err != nil {
		t.Fatal(err)
	}
	if len(c.Fabrics) != 2 || c.Fabrics[1].Name != "storage" || !c.Fabrics[1].UFMPKeys.Enabled() ||
		len(c.Fabrics[1].OpenSMConf) != 2 || c.Fabrics[1].UFMPKeys.Listen == "" {
		t.Errorf("the example parses to %v, want the storage fabric's pkeys API on its own listener", c.Fabrics)
	}
}
