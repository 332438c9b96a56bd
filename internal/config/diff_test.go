package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// diffBase sets the keys that others need beside them, so that each key
// below can be changed alone.
const diffBase = `[api]
token = s3cret-token-0123456789
tls_cert_file = /etc/afm/cert.pem
tls_key_file = /etc/afm/key.pem
[ufm_pkeys]
username = ib-kubernetes
password = s3cret-password-0123456789
pkey_range = 0x1000-0x1fff
[database]
connection = postgresql://afm@db/afm
[opensm]
log_file = /var/log/opensm.log
`

// diffChanges gives every key a value other than diffBase's (or its
// default) that the file accepts.
var diffChanges = map[string]string{
	"[api] listen": "127.0.0.1:9999", "[api] prefix": "/other", "[api] domain": "cloudy",
	"[api] token": "another-s3cret-token-0123", "[api] previous_tokens": "old-s3cret-token-0123456", "[api] physical_networks": "ibnet", "[api] reserved_guids": "0x0002c903000fff01", "[api] check_host": "true",
	"[api] tls_cert_file": "/etc/afm/cert2.pem", "[api] tls_key_file": "/etc/afm/key2.pem", "[api] access_log": "true",
	"[api] metrics_listen": "127.0.0.1:9464", "[api] metrics_token": "s3cret-metrics", "[api] debug_listen": "127.0.0.1:6060",
	"[ufm_pkeys] username": "k8s", "[ufm_pkeys] password": "another-s3cret-password", "[ufm_pkeys] previous_passwords": "old-s3cret-password-0123", "[ufm_pkeys] prefix": "/ufm2",
	"[ufm_pkeys] pkey_range": "0x1000-0x10ff", "[ufm_pkeys] apply_timeout": "5",
	"[ufm_pkeys] max_guids_per_request": "5000", "[ufm_pkeys] max_members_per_pkey": "40000",
	"[ufm_pkeys] max_members": "90000", "[ufm_pkeys] max_concurrent_requests": "2",
	"[ufm_pkeys] max_stored_request_bytes": "1000", "[ufm_pkeys] max_jobs_per_minute": "0",
	"[api] max_stored_request_bytes": "0", "[api] max_jobs_per_minute": "10",
	"[neutron] clouds_file": "/etc/afm/clouds.yaml", "[neutron] cloud": "ib-cloud",
	"[log] format":          "text",
	"[database] connection": "postgresql://afm@db2/afm", "[database] auto_migrate": "false",
	"[database] poll_interval": "2", "[database] job_retention": "8d",
	"[ha] ha": "true", "[ha] lease_timeout": "40",
	"[opensm] driver": "docker", "[opensm] container": "sm2", "[opensm] manager_container": "afm2",
	"[opensm] image": "opensm:2", "[opensm] command": "opensm -v", "[opensm] env_file": "/etc/afm/opensm.env",
	"[opensm] config_dir": "/var/lib/afm2", "[opensm] user": "afm-opensm2", "[opensm] log_file": "/var/log/opensm2.log",
	"[opensm] check_interval": "5", "[opensm] sweep_timeout": "5", "[opensm] flat_pkey": "0x7ffd",
	"[opensm] default_partition": "Default=0x7fff : ALL=limited, SELF=full ;", "[opensm] hardening": "keys",
	"[opensm] m_key_protection_level": "1", "[opensm] m_key_lease_period": "30",
	"[opensm] switch_pkey_capacity": "64", "[opensm] shared_default_partition": "true",
	"[opensm] partitions_template": "/etc/afm/partitions.conf.j2",
	"[opensm] verify":              "log", "[opensm] verify_timeout": "30", "[opensm] smp_port": "mlx5_1:2",
	"[opensm] audit_interval": "60",
}

// withKey returns diffBase with key (as "[section] key") set to value.
func withKey(t *testing.T, key, value string) *Config {
	t.Helper()
	section, name, _ := strings.Cut(strings.TrimPrefix(key, "["), "] ")
	var out []string
	in, set := false, false
	for _, line := range strings.Split(diffBase, "\n") {
		if strings.HasPrefix(line, "[") {
			if in && !set {
				out, set = append(out, name+" = "+value), true
			}
			in = line == "["+section+"]"
		}
		if in && strings.HasPrefix(line, name+" =") {
			line, set = name+" = "+value, true
		}
		out = append(out, line)
	}
	switch {
	case in && !set:
		out = append(out, name+" = "+value)
	case !set:
		out = append(out, "["+section+"]", name+" = "+value)
	}
	c, err := Parse(strings.NewReader(strings.Join(out, "\n")), "afm.conf")
	if err != nil {
		t.Fatalf("%s = %s: %v", key, value, err)
	}
	return c
}

// TestDiffNamesTheKey: each key changed alone is named as the file writes
// it, and nothing else is; every key of the file is covered.
func TestDiffNamesTheKey(t *testing.T) {
	base, err := Parse(strings.NewReader(diffBase), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(base, base); len(d) != 0 {
		t.Errorf("a configuration differs from itself: %v", d)
	}
	var keys []string
	for _, s := range sections {
		for _, f := range s.fields {
			keys = append(keys, "["+s.name+"] "+f.key)
		}
	}
	var getters []string
	for _, g := range keyGetters {
		getters = append(getters, g.name())
	}
	if !slices.Equal(keys, getters) {
		t.Fatalf("keyGetters list %v,\nthe file's keys are %v", getters, keys)
	}
	for _, key := range keys {
		value, ok := diffChanges[key]
		if !ok {
			t.Errorf("no changed value for %s in diffChanges", key)
			continue
		}
		if got := Diff(base, withKey(t, key, value)); !slices.Equal(got, []string{key}) {
			t.Errorf("%s changed: Diff says %v", key, got)
		}
	}
	// The default written out is no change.
	if got := Diff(base, withKey(t, "[opensm] check_interval", "60")); len(got) != 0 {
		t.Errorf("check_interval set to its default: Diff says %v", got)
	}
}

func TestDiffOpenSMConf(t *testing.T) {
	kv := func(pairs ...string) []KeyValue {
		var out []KeyValue
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, KeyValue{pairs[i], pairs[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		a, b []KeyValue
		want []string
	}{
		{kv("sm_priority", "1"), kv("sm_priority", "1"), nil},
		{kv("sm_priority", "1"), kv("sm_priority", "2"), []string{"[opensm_conf] sm_priority"}},
		{kv("sm_priority", "1"), nil, []string{"[opensm_conf] sm_priority"}},
		{nil, kv("guid", "0x1"), []string{"[opensm_conf] guid"}},
		{kv("a", "1", "b", "2"), kv("b", "2", "a", "1"), []string{"[opensm_conf]"}},
	} {
		a, b := Default(), Default()
		a.Fabrics[0].OpenSMConf, b.Fabrics[0].OpenSMConf = c.a, c.b
		if got := Diff(&a, &b); !slices.Equal(got, c.want) {
			t.Errorf("%v -> %v: Diff says %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:6060": true, "127.1.2.3:6060": true, "[::1]:6060": true, "localhost:6060": true,
		"0.0.0.0:6060": false, ":6060": false, "[::]:6060": false, "10.0.0.1:6060": false,
		"manager.example.com:6060": false, "6060": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %t, want %t", addr, got, want)
		}
	}
}

// TestDebugListenOnLoopbackOnly: pprof has no authentication; a listener
// off loopback is refused at load, naming the key.
func TestDebugListenOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "[::]:6060", "10.1.2.3:6060", "manager:6060"} {
		_, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token\ndebug_listen = "+addr+"\n"), "afm.conf")
		if err == nil || !strings.Contains(err.Error(), "[api] debug_listen = "+addr+" is not a loopback address") {
			t.Errorf("debug_listen = %s: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060"} {
		if _, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token\ndebug_listen = "+addr+"\n"), "afm.conf"); err != nil {
			t.Errorf("debug_listen = %s: %v", addr, err)
		}
	}
}

// TestMetricsOpen: /metrics goes without a token only when none is set and
// its listener is on loopback.
func TestMetricsOpen(t *testing.T) {
	for _, c := range []struct {
		listen, metricsListen, token string
		want                         bool
	}{
		{"127.0.0.1:8090", "", "", true},
		{"0.0.0.0:8090", "", "", false},
		{"0.0.0.0:8090", "127.0.0.1:9464", "", true},
		{"127.0.0.1:8090", "0.0.0.0:9464", "", false},
		{"127.0.0.1:8090", "", "s3cret", false}, // a token is always wanted once set
	} {
		a := API{Listen: c.listen, MetricsListen: c.metricsListen, MetricsToken: c.token}
		if got := a.MetricsOpen(); got != c.want {
			t.Errorf("%s", fmt.Sprintf("listen %s metrics_listen %q token %t: MetricsOpen %t, want %t",
				c.listen, c.metricsListen, c.token != "", got, c.want))
		}
	}
}
