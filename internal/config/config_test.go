package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// secretMarker is in every token and password of the fixtures: no error may show it.
const secretMarker = "s3cret"

// defaultsWith returns the defaults of a file that sets only the token, changed by edit.
func defaultsWith(edit func(c *Config)) *Config {
	c := Default()
	c.API.Token = "s3cret-token"
	if edit != nil {
		edit(&c)
	}
	return &c
}

func TestParseValidFiles(t *testing.T) {
	tests := []struct {
		file string
		want *Config
	}{
		{"minimal.conf", defaultsWith(nil)},
		{"empty-values.conf", defaultsWith(nil)},
		{"comments.conf", defaultsWith(func(c *Config) { c.API.Token = "s3cret-token # not a comment: part of the token" })},
		{"every-key.conf", &Config{
			API: API{Listen: "0.0.0.0:9090", Prefix: "/api/ufmRestV3", Domain: "fabric-1", Token: "s3cret-token",
				TLSCertFile: "/etc/alternative-fabric-manager/tls/cert.pem",
				TLSKeyFile:  "/etc/alternative-fabric-manager/tls/key.pem",
				CheckHost:   true, AccessLog: true, MetricsListen: "127.0.0.1:9464", MetricsToken: "s3cret-metrics-token",
				DebugListen: "127.0.0.1:6060", Quota: Quota{MaxStoredRequestBytes: 512 << 20, MaxJobsPerMinute: 300}},
			Log: Log{Format: "text"},
			Database: Database{
				Connection:   "mysql+pymysql://afm:s3cret%40pw@db.example.com:3307/afm?charset=utf8mb4",
				AutoMigrate:  false,
				PollInterval: 250 * time.Millisecond,
				JobRetention: 36 * time.Hour,
			},
			HA: HA{HA: true, LeaseTimeout: 12500 * time.Millisecond},
			Fabrics: []Fabric{{Name: DefaultFabric, PhysicalNetworks: []string{"ibnet", "ibnet-2"}, OpenSM: OpenSM{
				Driver:           "managed",
				Container:        "fabric-opensm",
				ManagerContainer: "afm-controller1",
				Image:            "registry.example.com/afm:1.2.3",
				Command:          []string{"/opt/open sm/bin/opensm", "--guid", "0x0002c90300a00001", "-d0", "two words", "$HOME"},
				EnvFile:          "/etc/alternative-fabric-manager/opensm.env",
				ConfigDir:        "/srv/afm/opensm",
				LogFile:          "/var/log/opensm/opensm.log",
				CheckInterval:    30 * time.Second,
				SweepTimeout:     120500 * time.Millisecond,
				FlatPKey:         0x0fff,
				DefaultPartition: "Default=0x7fff, ipoib, rate=7, mtu=5 : ALL=limited, SELF=full ;",
				Hardening: opensm.Hardening{
					Groups:              []opensm.Group{opensm.GroupMKey, opensm.GroupEnforcement},
					MKeyProtectionLevel: 3,
					MKeyLeasePeriod:     0,
				},
				SwitchPKeyCapacity: 64,

				SharedDefaultPartition: true,
				PartitionsTemplate:     "/etc/alternative-fabric-manager/partitions.conf.j2",
				Verify:                 VerifyLog,
				VerifyTimeout:          90 * time.Second,
				SMPPort:                "mlx5_0:1",

				AuditInterval: 90 * time.Second,
			},
				UFMPKeys: UFMPKeys{Username: "ib-kubernetes", Password: "s3cret-ufm-password", Prefix: "/api/ufmRest",
					PKeyRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}, ApplyTimeout: 12500 * time.Millisecond,
					MaxGUIDsPerRequest: 2000, MaxMembersPerPKey: 20000, MaxMembers: 40000, MaxConcurrentRequests: 2,
					Quota: Quota{MaxJobsPerMinute: 60}},
				OpenSMConf: []KeyValue{{"sm_priority", "15"}, {"sweep_interval", "10"}, {"sm_key", "0x0123456789abcdef"}},
			}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Load(filepath.Join("testdata", "valid", tt.file))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", *got, *tt.want)
			}
		})
	}
}

// TestDefaults pins the documented defaults, which other tools and the sample rely on.
func TestDefaults(t *testing.T) {
	got, err := Parse(strings.NewReader("[api]\ntoken = t\n"), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		API: API{Listen: "127.0.0.1:8090", Prefix: "/ufmRestV3", Domain: "cloudx", Token: "t",
			Quota: Quota{MaxStoredRequestBytes: 1 << 30}},
		Log: Log{Format: "json"},
		Database: Database{
			Connection:   "sqlite:////var/lib/alternative-fabric-manager/afm.db",
			AutoMigrate:  true,
			PollInterval: time.Second,
			JobRetention: 7 * 24 * time.Hour,
		},
		HA: HA{LeaseTimeout: 30 * time.Second},
		Fabrics: []Fabric{{Name: DefaultFabric, PhysicalNetworks: []string{"*"}, OpenSM: OpenSM{
			Driver:           "process",
			Container:        "opensm",
			ManagerContainer: "alternative-fabric-manager",
			Command:          []string{"opensm"},
			ConfigDir:        "/var/lib/alternative-fabric-manager/opensm",
			LogFile:          "/var/lib/alternative-fabric-manager/opensm/opensm.log",
			CheckInterval:    60 * time.Second,
			SweepTimeout:     60 * time.Second,
			FlatPKey:         0x7ffe,
			DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
			Hardening: opensm.Hardening{
				Groups:              []opensm.Group{"m_key", "keys", "default_partition", "enforcement", "sa_trust"},
				MKeyProtectionLevel: 2,
				MKeyLeasePeriod:     60,
			},
			SwitchPKeyCapacity: 32,
			Verify:             VerifyTables,
			VerifyTimeout:      60 * time.Second,

			AuditInterval: 300 * time.Second,
		},
			UFMPKeys: UFMPKeys{Prefix: "/ufmRest", ApplyTimeout: 30 * time.Second, MaxGUIDsPerRequest: 10000,
				MaxMembersPerPKey: 50000, MaxMembers: 100000, MaxConcurrentRequests: 4,
				Quota: Quota{MaxStoredRequestBytes: 256 << 20, MaxJobsPerMinute: 600}},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", *got, *want)
	}
}

func TestLogFileFollowsConfigDir(t *testing.T) {
	got, err := Parse(strings.NewReader("[api]\ntoken = t\n[opensm]\nconfig_dir = /srv/opensm\n"), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got.Fabrics[0].OpenSM.LogFile != "/srv/opensm/opensm.log" {
		t.Errorf("LogFile = %q, want /srv/opensm/opensm.log", got.Fabrics[0].OpenSM.LogFile)
	}
}

func TestWindowsLineEndings(t *testing.T) {
	got, err := Parse(strings.NewReader("\ufeff[api]\r\ntoken = t\r\n[opensm_conf]\r\nsm_priority = 15\r\n"), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got.API.Token != "t" || !reflect.DeepEqual(got.Fabrics[0].OpenSMConf, []KeyValue{{"sm_priority", "15"}}) {
		t.Errorf("token %q, opensm_conf %v: carriage returns or the byte order mark were kept", got.API.Token, got.Fabrics[0].OpenSMConf)
	}
}

// TestParseInvalidFiles reads each fixture's "# want:" lines: every one must be in
// the error, and no secret may be.
func TestParseInvalidFiles(t *testing.T) {
	checkInvalidFixtures(t, filepath.Join("testdata", "invalid"), false)
}

// checkInvalidFixtures parses each fixture of dir: it must fail with an error
// that holds every one of the fixture's "# want: " lines and no secret (and,
// with oneError, that reports one mistake alone).
func checkInvalidFixtures(t *testing.T, dir string, oneError bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for line := range strings.Lines(string(text)) {
				if want, ok := strings.CutPrefix(strings.TrimSpace(line), "# want: "); ok {
					wants = append(wants, want)
				}
			}
			if len(wants) == 0 {
				t.Fatal("fixture has no \"# want: \" line")
			}
			cfg, err := Parse(strings.NewReader(string(text)), "afm.conf")
			if err == nil {
				t.Fatalf("no error; got %v", cfg)
			}
			if n := strings.Count(err.Error(), "afm.conf: "); oneError && n != 1 {
				t.Errorf("%d errors, want the fixture's one:\n%v", n, err)
			}
			for _, want := range wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
			if strings.Contains(err.Error(), secretMarker) {
				t.Errorf("error shows a secret:\n%v", err)
			}
		})
	}
}

// TestBadValues covers each key's check, one value at a time.
// confWithValue is the smallest valid configuration (an API token) with one
// more key set in its section.
func confWithValue(section, key, value string) string {
	text := "[api]\ntoken = s3cret-token\n"
	if section != "api" {
		text += "[" + section + "]\n"
	}
	return text + key + " = " + value + "\n"
}

// badValues are values each key refuses, and a part of the error that says
// what it wants.
var badValues = []struct {
	section, key, value string
	want                string
}{
	{"api", "listen", "8090", "want host:port"},
	{"api", "listen", "127.0.0.1:http", "port from 0 to 65535"},
	{"api", "listen", "127.0.0.1:70000", "port from 0 to 65535"},
	{"api", "prefix", "ufmRestV3", "starts with '/'"},
	{"ufm_pkeys", "pkey_range", "0x1000", "such as 0x1000-0x1fff"},
	{"ufm_pkeys", "pkey_range", "0x2000-0x1000", "the first not above the last"},
	{"ufm_pkeys", "pkey_range", "0x0000-0x1000", "from 0x0001 to 0x7ffe"},
	{"ufm_pkeys", "pkey_range", "0x1000-0x7fff", "from 0x0001 to 0x7ffe"},
	{"ufm_pkeys", "pkey_range", "4096-8191", "in hexadecimal"},
	{"ufm_pkeys", "username", "ib:k8s", "cannot hold ':'"},
	{"ufm_pkeys", "apply_timeout", "0", "greater than 0"},
	{"ufm_pkeys", "max_guids_per_request", "0", "from 1 to 1000000"},
	{"ufm_pkeys", "max_members", "2000000", "from 1 to 1000000"},
	{"ufm_pkeys", "max_members_per_pkey", "many", "want a number of GUIDs from 1"},
	{"ufm_pkeys", "max_concurrent_requests", "0", "from 1 to 1000"},
	{"ufm_pkeys", "prefix", "/ufmRest/", "does not end with one"},
	{"api", "prefix", "/ufmRestV3/", "does not end with one"},
	{"api", "prefix", "/", "does not end with one"},
	{"api", "prefix", "/a//b", "empty segments"},
	{"api", "prefix", "/:domain", "none of ? # % : *"},
	{"api", "domain", "cloud/x", "one path segment"},
	{"api", "domain", "..", "one path segment"},
	{"database", "connection", "postgres", "not a URL"},
	{"database", "auto_migrate", "yes please", "want true or false"},
	{"database", "poll_interval", "1s", "want a number of seconds"},
	{"database", "poll_interval", "NaN", "want a number of seconds"},
	{"database", "poll_interval", "0.0000001", "at least 0.001"},
	{"database", "job_retention", "7 d", "want a whole number of days"},
	{"database", "job_retention", "1.5d", "want a whole number of days"},
	{"database", "job_retention", "-7d", "want a whole number of days"},
	{"database", "job_retention", "7w", "want a whole number of days"},
	{"database", "job_retention", "23h", "from 1d to 3650d"},
	{"database", "job_retention", "3651d", "from 1d to 3650d"},
	{"database", "job_retention", "9999999999d", "from 1d to 3650d"},
	{"opensm", "driver", "podman", `want one of process, managed, docker`},
	{"opensm", "container", "-opensm", `want a Docker container name`},
	{"opensm", "manager_container", "my manager", `want a Docker container name`},
	{"opensm", "command", `"`, "unterminated double quote"},
	{"opensm", "command", `'opensm`, "unterminated single quote"},
	{"opensm", "command", `opensm \`, "backslash that escapes nothing"},
	{"opensm", "command", `"" -d0`, "no executable"},
	{"opensm", "env_file", "opensm.env", "want an absolute path"},
	{"opensm", "user", "afm opensm", "want a user name"},
	{"opensm", "partitions_template", "partitions.conf.j2", "want an absolute path"},
	{"opensm", "shared_default_partition", "TRUE!", "want true or false"},
	{"opensm", "config_dir", "opensm", "want an absolute path"},
	{"opensm", "log_file", "stdout", "want an absolute path"},
	{"opensm", "check_interval", "-0.5", "greater than 0"},
	{"opensm", "sweep_timeout", "0", "greater than 0"},
	{"opensm", "audit_interval", "-1", "greater than 0 and at most"},
	{"opensm", "audit_interval", "off", "or 0 (off)"},
	{"opensm", "sweep_timeout", "86401", "at most 86400"},
	{"ha", "ha", "maybe", "want true or false"},
	{"ha", "lease_timeout", "0.5", "want at least 1 seconds"},
	{"ha", "lease_timeout", "0", "greater than 0"},
	{"api", "physical_networks", "ibnet,*", "* alone"},
	{"api", "physical_networks", "ibnet,,ibnet2", `physical network ""`},
	{"api", "physical_networks", "ib net", `physical network "ib net"`},
	{"api", "physical_networks", "ibnet,ibnet", "listed twice"},
	{"api", "check_host", "yes please", "want true or false"},
	{"api", "check_host", "true # refuse a squat", "want true or false"},
	{"api", "reserved_guids", "0x2c903000fff01", "entry 1, \"0x2c903000fff01\": want a comma-separated list of GUIDs, each 0x and 16 hex digits"},
	{"api", "reserved_guids", "0002c903000fff01", "each 0x and 16 hex digits"},
	{"api", "reserved_guids", "0x0002c903000fff01,", "entry 2, \"\""},
	{"api", "reserved_guids", "0x0002c903000fff0g", "each 0x and 16 hex digits"},
	{"api", "reserved_guids", "0x0000000000000000", "entry 1 is the zero GUID"},
	{"api", "reserved_guids", "0x0002c903000fff01, 0x0002C903000FFF01", "entry 2, GUID 0x0002c903000fff01, is listed twice"},
	{"api", "reserved_guids", "0x0002c903000fff01 0x0002c903000fff02", "entry 1"},
	{"opensm", "flat_pkey", "0x0000", "from 0x0001 to 0x7ffe"},
	{"opensm", "flat_pkey", "0x8001", "from 0x0001 to 0x7ffe"},
	{"opensm", "flat_pkey", "7ffe", "from 0x0001 to 0x7ffe"},
	{"opensm", "flat_pkey", "0x07ffe", "from 0x0001 to 0x7ffe"},
	{"opensm", "flat_pkey", "0xzz", "from 0x0001 to 0x7ffe"},
	{"opensm", "hardening", "m_key, bogus", `unknown hardening group "bogus"`},
	{"opensm", "hardening", "M_KEY", `unknown hardening group "M_KEY"`},
	{"opensm", "hardening", "m_key,,keys", "empty group name"},
	{"opensm", "hardening", "keys, keys", `group "keys" given twice`},
	{"opensm", "hardening", "all, m_key", `"all" stands alone`},
	{"opensm", "hardening", "none, keys", `"none" stands alone`},
	{"opensm", "m_key_protection_level", "0", "want 1, 2 or 3"},
	{"opensm", "m_key_protection_level", "4", "want 1, 2 or 3"},
	{"opensm", "m_key_protection_level", "two", "want 1, 2 or 3"},
	{"opensm", "m_key_lease_period", "-1", "from 0 (no lease) to 65535"},
	{"opensm", "m_key_lease_period", "65536", "from 0 (no lease) to 65535"},
	{"opensm", "m_key_lease_period", "1m", "from 0 (no lease) to 65535"},
	{"opensm", "verify", "TABLES", "want tables (the ports' P_Key tables are read back"},
	{"opensm", "verify", "none", "or log (OpenSM's log alone)"},
	{"opensm", "verify_timeout", "0", "greater than 0"},
	{"opensm", "verify_timeout", "86401", "at most 86400"},
	{"opensm", "smp_port", "mlx5_0", "want a local HCA port as <device>:<port number>"},
	{"opensm", "smp_port", "mlx5_0:0", "want a local HCA port"},
	{"opensm", "smp_port", "mlx5 0:1", "want a local HCA port"},
	{"opensm", "smp_port", ":1", "want a local HCA port"},
	{"opensm", "audit_interval", "-1", "or 0 (off)"},
	{"opensm", "audit_interval", "often", "or 0 (off)"},
}

func TestBadValues(t *testing.T) {
	for _, tt := range badValues {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			_, err := Parse(strings.NewReader(confWithValue(tt.section, tt.key, tt.value)), "afm.conf")
			if err == nil {
				t.Fatal("no error")
			}
			prefix := "afm.conf: [" + tt.section + "] " + tt.key + " = "
			if !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want %q and %q", err, prefix, tt.want)
			}
		})
	}
}

func TestGoodValues(t *testing.T) {
	tests := []struct {
		section, key, value string
		check               func(c *Config) bool
	}{
		{"api", "listen", ":8090", func(c *Config) bool { return c.API.Listen == ":8090" }},
		{"api", "listen", "[::1]:0", func(c *Config) bool { return c.API.Listen == "[::1]:0" }},
		{"database", "auto_migrate", "OFF", func(c *Config) bool { return !c.Database.AutoMigrate }},
		{"database", "auto_migrate", "1", func(c *Config) bool { return c.Database.AutoMigrate }},
		{"database", "connection", "postgresql://afm@db/afm", func(c *Config) bool {
			return c.Database.Connection == "postgresql://afm@db/afm"
		}},
		{"api", "physical_networks", " * ", func(c *Config) bool { return reflect.DeepEqual(c.Fabrics[0].PhysicalNetworks, []string{"*"}) }},
		{"api", "physical_networks", "ibnet", func(c *Config) bool { return reflect.DeepEqual(c.Fabrics[0].PhysicalNetworks, []string{"ibnet"}) }},
		{"opensm", "flat_pkey", "0x1", func(c *Config) bool { return c.Fabrics[0].OpenSM.FlatPKey == 1 }},
		{"opensm", "flat_pkey", "0x7FFE", func(c *Config) bool { return c.Fabrics[0].OpenSM.FlatPKey == 0x7ffe }},
		{"opensm", "switch_pkey_capacity", "2", func(c *Config) bool { return c.Fabrics[0].OpenSM.SwitchPKeyCapacity == 2 }},
		{"opensm", "switch_pkey_capacity", "65535", func(c *Config) bool { return c.Fabrics[0].OpenSM.SwitchPKeyCapacity == 65535 }},
		{"opensm", "shared_default_partition", "true", func(c *Config) bool { return c.Fabrics[0].OpenSM.SharedDefaultPartition }},
		{"opensm", "partitions_template", "/etc/afm//p.j2", func(c *Config) bool { return c.Fabrics[0].OpenSM.PartitionsTemplate == "/etc/afm/p.j2" }},
		{"opensm", "check_interval", "0.001", func(c *Config) bool { return c.Fabrics[0].OpenSM.CheckInterval == time.Millisecond }},
		{"opensm", "verify", "log", func(c *Config) bool { return c.Fabrics[0].OpenSM.Verify == VerifyLog }},
		{"opensm", "verify_timeout", "2.5", func(c *Config) bool { return c.Fabrics[0].OpenSM.VerifyTimeout == 2500*time.Millisecond }},
		{"opensm", "smp_port", "mlx5_0:1", func(c *Config) bool { return c.Fabrics[0].OpenSM.SMPPort == "mlx5_0:1" }},
		{"opensm", "sweep_timeout", "86400", func(c *Config) bool { return c.Fabrics[0].OpenSM.SweepTimeout == 24*time.Hour }},
		{"opensm", "audit_interval", "0", func(c *Config) bool { return c.Fabrics[0].OpenSM.AuditInterval == 0 }},
		{"opensm", "audit_interval", "0.5", func(c *Config) bool { return c.Fabrics[0].OpenSM.AuditInterval == 500*time.Millisecond }},
		{"opensm", "hardening", "none", func(c *Config) bool {
			return c.Fabrics[0].OpenSM.Hardening.Groups != nil && len(c.Fabrics[0].OpenSM.Hardening.Groups) == 0
		}},
		{"opensm", "hardening", "all", func(c *Config) bool {
			return reflect.DeepEqual(c.Fabrics[0].OpenSM.Hardening.Groups, opensm.AllGroups)
		}},
		// Spaces and any order; groups come back in their documented order.
		{"opensm", "hardening", " enforcement ,m_key ", func(c *Config) bool {
			return reflect.DeepEqual(c.Fabrics[0].OpenSM.Hardening.Groups, []opensm.Group{opensm.GroupMKey, opensm.GroupEnforcement})
		}},
		{"opensm", "m_key_lease_period", "0", func(c *Config) bool { return c.Fabrics[0].OpenSM.Hardening.MKeyLeasePeriod == 0 }},
		{"opensm", "m_key_protection_level", "1", func(c *Config) bool { return c.Fabrics[0].OpenSM.Hardening.MKeyProtectionLevel == 1 }},
		{"opensm", "command", `opensm -d0 ""`, func(c *Config) bool {
			return reflect.DeepEqual(c.Fabrics[0].OpenSM.Command, []string{"opensm", "-d0", ""})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			c, err := Parse(strings.NewReader(confWithValue(tt.section, tt.key, tt.value)), "afm.conf")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("value not stored as expected: %#v", *c)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afm.conf")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load of a missing file: error %v, want one naming %s", err, path)
	}
}

func TestLoadNamesFileInErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(path, []byte("[api]\ntokn = x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+`: unknown key "tokn" in [api]`) {
		t.Errorf("error %v, want it to start with the path", err)
	}
}

func TestOwnedOptionsAreRefusedInAnyCase(t *testing.T) {
	for _, key := range OwnedOpenSMOptions {
		for _, spelling := range []string{key, strings.ToUpper(key)} {
			text := "[api]\ntoken = t\n[opensm_conf]\n" + spelling + " = x\n"
			_, err := Parse(strings.NewReader(text), "afm.conf")
			if err == nil || !strings.Contains(err.Error(), "["+opensmConfSection+"] "+spelling+" ") {
				t.Errorf("%s: error %v, want one naming the key", spelling, err)
			}
		}
	}
}

// TestHardeningOwnsItsOptions checks that every option a hardening group writes
// is refused in [opensm_conf] while the group is on, with the group named, and
// accepted once the group is off.
func TestHardeningOwnsItsOptions(t *testing.T) {
	for _, key := range []string{"m_key", "m_key_protection_level", "m_key_lease_period", "m_key_lookup",
		"sm_key", "sa_key", "part_enforce", "no_partition_enforcement", "allow_both_pkeys", "keep_pkey_indexes",
		"sa_enhanced_trust_model", "m_key_per_port"} {
		group := opensm.OptionGroup(key)
		if group == "" {
			t.Errorf("%s: no hardening group owns it", key)
			continue
		}
		on := "[api]\ntoken = t\n[opensm_conf]\n" + key + " = 0x7\n[opensm]\nhardening = " + string(group) + "\n"
		_, err := Parse(strings.NewReader(on), "afm.conf")
		if want := "[opensm_conf] " + key + " (line 4): the hardening group " + string(group) + " sets this option"; err == nil ||
			!strings.Contains(err.Error(), want) {
			t.Errorf("%s with %s on: error %v, want %q", key, group, err, want)
		}
		var others []string
		for _, g := range opensm.AllGroups {
			if g != group && g != opensm.GroupDefaultPartition {
				others = append(others, string(g))
			}
		}
		off := "[api]\ntoken = t\n[opensm]\nhardening = " + strings.Join(others, ",") + "\n[opensm_conf]\n" + key + " = 0x7\n"
		c, err := Parse(strings.NewReader(off), "afm.conf")
		if err != nil {
			t.Errorf("%s with %s off: %v", key, group, err)
			continue
		}
		if !reflect.DeepEqual(c.Fabrics[0].OpenSMConf, []KeyValue{{key, "0x7"}}) {
			t.Errorf("%s with %s off: [opensm_conf] = %v", key, group, c.Fabrics[0].OpenSMConf)
		}
	}
}

func TestHardeningDefaultPartition(t *testing.T) {
	tests := []struct {
		hardening, defaultPartition string
		shared                      bool   // [opensm] shared_default_partition
		wantErr                     string // "" for none
	}{
		{"all", "Default=0x7fff, ipoib : ALL=full ;", false, "ALL=full makes every port a full member"},
		{"default_partition", "Default=0x7fff : ALL_CAS=full, SELF=full ;", false, "ALL_CAS=full makes every port a full member"},
		{"default_partition", "Default=0x7fff : ALL=limited, SELF=full ;", false, ""},
		{"default_partition", "Default=0x7fff : ALL=limited, 0x0002c90300a00001=full, SELF=full ;", false, ""},
		// Off, the load-time rule does not apply (the partitions check still does).
		{"m_key, keys, enforcement", "Default=0x7fff, ipoib : ALL=full ;", false, ""},
		// Shared on purpose: the operator said so.
		{"all", "Default=0x7fff, ipoib : ALL=full ;", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.hardening+" "+tt.defaultPartition, func(t *testing.T) {
			text := "[api]\ntoken = t\n[opensm]\nhardening = " + tt.hardening + "\ndefault_partition = " + tt.defaultPartition +
				"\nshared_default_partition = " + strconv.FormatBool(tt.shared) + "\n"
			_, err := Parse(strings.NewReader(text), "afm.conf")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), "hardening group default_partition"):
				t.Errorf("error %v does not name the hardening group", err)
			}
		})
	}
}

func TestJobRetentionUnits(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"86400", 24 * time.Hour},
		{"90000s", 25 * time.Hour},
		{"1440m", 24 * time.Hour},
		{"36h", 36 * time.Hour},
		{"3650d", 3650 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c, err := Parse(strings.NewReader("[api]\ntoken = t\n[database]\njob_retention = "+tt.value+"\n"), "afm.conf")
			if err != nil {
				t.Fatal(err)
			}
			if c.Database.JobRetention != tt.want {
				t.Errorf("JobRetention = %s, want %s", c.Database.JobRetention, tt.want)
			}
		})
	}
}

// TestCheckUFMPassword: with the pkeys API on, a password shorter than
// MinPasswordLength is refused as a short token is, never quoted.
func TestCheckUFMPassword(t *testing.T) {
	for _, tt := range []struct {
		password string
		ok       bool
	}{
		{"s3cret", false},
		{"s3cret-passwd15", false},
		{"s3cret-passwd-16", true},
	} {
		c := defaultsWith(func(c *Config) {
			c.API.Token = "s3cret-token-long-enough"
			c.Fabrics[0].UFMPKeys = UFMPKeys{Username: "ib-kubernetes", Password: tt.password, Prefix: "/ufmRest"}
		})
		err := c.CheckToken()
		if (err == nil) != tt.ok {
			t.Errorf("password of %d characters: error %v, want ok=%v", len(tt.password), err, tt.ok)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), "[ufm_pkeys] password is "+strconv.Itoa(len(tt.password))+" characters long") ||
			strings.Contains(err.Error(), secretMarker)) {
			t.Errorf("error %q: want the length, never the password", err)
		}
	}
}

// TestCheckToken: a token shorter than MinTokenLength is refused with advice on
// making one, and the error never quotes the token.
func TestCheckToken(t *testing.T) {
	for _, tt := range []struct {
		token string
		ok    bool
	}{
		{"s3cret", false},
		{"s3cret-token-15", false}, // 15 characters
		{"s3cret-token-016", true},
		{"s3cret" + strings.Repeat("x", 58), true},
	} {
		c := defaultsWith(func(c *Config) { c.API.Token = tt.token })
		err := c.CheckToken()
		if (err == nil) != tt.ok {
			t.Errorf("token of %d characters: error %v, want ok=%v", len(tt.token), err, tt.ok)
			continue
		}
		if err == nil {
			continue
		}
		for _, want := range []string{"[api] token is " + strconv.Itoa(len(tt.token)) + " characters long",
			"at least 16", "openssl rand -hex 32"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		if strings.Contains(err.Error(), secretMarker) {
			t.Errorf("error shows the token: %v", err)
		}
	}
}

// TestOpenSMConfLinesOpenSMReadsWhole: an [opensm_conf] value OpenSM would
// read as more than one option, past its line buffer or through a control
// character, is refused at load, naming the key; the value is not shown.
func TestOpenSMConfLinesOpenSMReadsWhole(t *testing.T) {
	smuggled := " no_partition_enforcement TRUE"
	for name, value := range map[string]string{
		"past the buffer":  "/" + strings.Repeat("x", opensm.MaxOptionLine-len("node_name_map_name /")) + smuggled,
		"carriage return":  "/etc/map\r" + smuggled,
		"vertical tab":     "/etc/map\v" + smuggled,
		"NUL":              "/etc/map\x00" + smuggled,
		"DEL":              "/etc/map\x7f",
		"escape sequences": "/etc/map\x1b[2J",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token\n[opensm_conf]\nnode_name_map_name = "+value+"\n"), "afm.conf")
			if err == nil || !strings.Contains(err.Error(), "afm.conf: [opensm_conf] node_name_map_name (line 4): ") {
				t.Fatalf("error %v, want one naming [opensm_conf] node_name_map_name", err)
			}
			if strings.Contains(err.Error(), "no_partition_enforcement") {
				t.Errorf("the error shows the value: %v", err)
			}
		})
	}
	longest := strings.Repeat("x", opensm.MaxOptionLine-len("node_name_map_name "))
	if _, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token\n[opensm_conf]\nnode_name_map_name = "+longest+"\n"), "afm.conf"); err != nil {
		t.Errorf("a %d-byte option line: %v", opensm.MaxOptionLine, err)
	}
}

// [ha] ha = true runs OpenSM only while the manager leads: with the drivers
// that start and stop it. driver = docker (testdata/invalid/ha-docker-driver.conf)
// never stops its container and is refused.
func TestHADrivers(t *testing.T) {
	for _, driver := range []string{DriverProcess, DriverManaged} {
		text := "[api]\ntoken = s3cret-token\n[database]\nconnection = postgresql://afm@db/afm\n" +
			"[ha]\nha = true\n[opensm]\ndriver = " + driver + "\n"
		if _, err := Parse(strings.NewReader(text), "afm.conf"); err != nil {
			t.Errorf("ha with driver = %s: %v", driver, err)
		}
	}
}

// TestPreviousSecrets: the secrets accepted during a rotation are held to the
// rules of the current ones, and no error quotes one.
func TestPreviousSecrets(t *testing.T) {
	pkeys := "[ufm_pkeys]\nusername = k8s\npassword = s3cret-pkeys-password\npkey_range = 0x1000-0x1fff\n"
	for _, tt := range []struct {
		name, text, want string
	}{
		{"an empty entry", "previous_tokens = s3cret-old-token-1,,s3cret-old-token-2\n", "[api] previous_tokens = (not shown) (line 3): entry 2 is empty"},
		{"a repeated entry", "previous_tokens = s3cret-old-token-1, s3cret-old-token-1\n", "entry 2 repeats an earlier one"},
		{"a short token", "previous_tokens = s3cret-old-token-1, s3cret-short\n", "[api] previous_tokens: entry 2 is 12 characters long; it must have at least 16"},
		{"a short password", pkeys + "previous_passwords = s3cret-pw\n", "[ufm_pkeys] previous_passwords: entry 1 is 9 characters long"},
		{"passwords without the pkeys API", "[ufm_pkeys]\nprevious_passwords = s3cret-old-pkeys-password\n",
			"[ufm_pkeys] previous_passwords is set but username and password are not"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token-long-enough\n"+tt.text), "afm.conf")
			if err == nil {
				err = c.CheckToken()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret-") {
				t.Errorf("error quotes a secret: %v", err)
			}
		})
	}
	c, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token-long-enough\n"+
		"previous_tokens = s3cret-old-token-1 , s3cret-old-token-2\n"+pkeys+"previous_passwords = s3cret-old-pkeys-pw\n"), "afm.conf")
	if err == nil {
		err = c.CheckToken()
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s3cret-old-token-1", "s3cret-old-token-2"}; !slices.Equal(c.API.PreviousTokens, want) {
		t.Errorf("previous_tokens read as %q, want %q", c.API.PreviousTokens, want)
	}
	if want := []string{"s3cret-old-pkeys-pw"}; !slices.Equal(c.Fabrics[0].UFMPKeys.PreviousPasswords, want) {
		t.Errorf("previous_passwords read as %q, want %q", c.Fabrics[0].UFMPKeys.PreviousPasswords, want)
	}
}
