package config

import (
	"reflect"
	"slices"
)

// Diff names the keys whose effective values differ between a and b, as the
// file writes them ("[api] token", "[opensm_conf] sm_key"), in the order of
// the sample file, never with their values: some are secrets. A key set to
// its default in one and left out of the other is no difference.
func Diff(a, b *Config) []string {
	var out []string
	for _, k := range keyGetters {
		if !reflect.DeepEqual(k.get(a), k.get(b)) {
			out = append(out, k.name())
		}
	}
	// The getters read the default fabric's keys, the file's top-level ones.
	out = append(out, diffOpenSMConf("["+opensmConfSection+"]", a.Fabrics[0].OpenSMConf, b.Fabrics[0].OpenSMConf)...)
	out = append(out, diffFabrics(a.Fabrics[1:], b.Fabrics[1:])...)
	return append(out, diffPKeysClients(a.PKeysClients, b.PKeysClients)...)
}

// diffOpenSMConf names the [opensm_conf] options added, removed or changed,
// and the section alone when only their order changed (OpenSM reads them in
// file order).
func diffOpenSMConf(section string, a, b []KeyValue) []string {
	var out []string
	valueOf := func(kvs []KeyValue, key string) (string, bool) {
		i := slices.IndexFunc(kvs, func(kv KeyValue) bool { return kv.Key == key })
		if i < 0 {
			return "", false
		}
		return kvs[i].Value, true
	}
	seen := map[string]bool{}
	for _, kv := range slices.Concat(a, b) {
		if seen[kv.Key] {
			continue
		}
		seen[kv.Key] = true
		va, inA := valueOf(a, kv.Key)
		vb, inB := valueOf(b, kv.Key)
		if inA != inB || va != vb {
			out = append(out, section+" "+kv.Key)
		}
	}
	if len(out) == 0 && !slices.Equal(a, b) {
		out = append(out, section)
	}
	return out
}

// keyGetter reads one key's effective value out of a Config.
type keyGetter struct {
	section, key string
	get          func(c *Config) any
}

func (k keyGetter) name() string { return "[" + k.section + "] " + k.key }

// keyGetters has one entry for every key of sections, in the same order
// (TestDiffNamesEveryKey checks it): the settings are Go fields, but an
// operator knows them by the file's keys.
var keyGetters = []keyGetter{
	{"api", "listen", func(c *Config) any { return c.API.Listen }},
	{"api", "prefix", func(c *Config) any { return c.API.Prefix }},
	{"api", "domain", func(c *Config) any { return c.API.Domain }},
	{"api", "token", func(c *Config) any { return c.API.Token }},
	{"api", "previous_tokens", func(c *Config) any { return c.API.PreviousTokens }},
	{"api", "physical_networks", func(c *Config) any { return c.Fabrics[0].PhysicalNetworks }},
	{"api", "reserved_guids", func(c *Config) any { return c.API.ReservedGUIDs }},
	{"api", "tls_cert_file", func(c *Config) any { return c.API.TLSCertFile }},
	{"api", "tls_key_file", func(c *Config) any { return c.API.TLSKeyFile }},
	{"api", "check_host", func(c *Config) any { return c.API.CheckHost }},
	{"api", "access_log", func(c *Config) any { return c.API.AccessLog }},
	{"api", "metrics_listen", func(c *Config) any { return c.API.MetricsListen }},
	{"api", "metrics_token", func(c *Config) any { return c.API.MetricsToken }},
	{"api", "debug_listen", func(c *Config) any { return c.API.DebugListen }},
	{"api", "max_stored_request_bytes", func(c *Config) any { return c.API.Quota.MaxStoredRequestBytes }},
	{"api", "max_jobs_per_minute", func(c *Config) any { return c.API.Quota.MaxJobsPerMinute }},
	{"ufm_pkeys", "username", func(c *Config) any { return c.Fabrics[0].UFMPKeys.Username }},
	{"ufm_pkeys", "password", func(c *Config) any { return c.Fabrics[0].UFMPKeys.Password }},
	{"ufm_pkeys", "previous_passwords", func(c *Config) any { return c.Fabrics[0].UFMPKeys.PreviousPasswords }},
	{"ufm_pkeys", "prefix", func(c *Config) any { return c.Fabrics[0].UFMPKeys.Prefix }},
	{"ufm_pkeys", "pkey_range", func(c *Config) any { return c.Fabrics[0].UFMPKeys.PKeyRange }},
	{"ufm_pkeys", "apply_timeout", func(c *Config) any { return c.Fabrics[0].UFMPKeys.ApplyTimeout }},
	{"ufm_pkeys", "max_guids_per_request", func(c *Config) any { return c.Fabrics[0].UFMPKeys.MaxGUIDsPerRequest }},
	{"ufm_pkeys", "max_members_per_pkey", func(c *Config) any { return c.Fabrics[0].UFMPKeys.MaxMembersPerPKey }},
	{"ufm_pkeys", "max_members", func(c *Config) any { return c.Fabrics[0].UFMPKeys.MaxMembers }},
	{"ufm_pkeys", "max_concurrent_requests", func(c *Config) any { return c.Fabrics[0].UFMPKeys.MaxConcurrentRequests }},
	{"ufm_pkeys", "max_stored_request_bytes", func(c *Config) any { return c.Fabrics[0].UFMPKeys.Quota.MaxStoredRequestBytes }},
	{"ufm_pkeys", "max_jobs_per_minute", func(c *Config) any { return c.Fabrics[0].UFMPKeys.Quota.MaxJobsPerMinute }},
	{"neutron", "clouds_file", func(c *Config) any { return c.Neutron.CloudsFile }},
	{"neutron", "cloud", func(c *Config) any { return c.Neutron.Cloud }},
	{"log", "format", func(c *Config) any { return c.Log.Format }},
	{"database", "connection", func(c *Config) any { return c.Database.Connection }},
	{"database", "auto_migrate", func(c *Config) any { return c.Database.AutoMigrate }},
	{"database", "poll_interval", func(c *Config) any { return c.Database.PollInterval }},
	{"database", "job_retention", func(c *Config) any { return c.Database.JobRetention }},
	{"ha", "ha", func(c *Config) any { return c.HA.HA }},
	{"ha", "lease_timeout", func(c *Config) any { return c.HA.LeaseTimeout }},
	{"opensm", "driver", func(c *Config) any { return c.Fabrics[0].OpenSM.Driver }},
	{"opensm", "container", func(c *Config) any { return c.Fabrics[0].OpenSM.Container }},
	{"opensm", "manager_container", func(c *Config) any { return c.Fabrics[0].OpenSM.ManagerContainer }},
	{"opensm", "image", func(c *Config) any { return c.Fabrics[0].OpenSM.Image }},
	{"opensm", "command", func(c *Config) any { return c.Fabrics[0].OpenSM.Command }},
	{"opensm", "user", func(c *Config) any { return c.Fabrics[0].OpenSM.User }},
	{"opensm", "env_file", func(c *Config) any { return c.Fabrics[0].OpenSM.EnvFile }},
	{"opensm", "config_dir", func(c *Config) any { return c.Fabrics[0].OpenSM.ConfigDir }},
	{"opensm", "log_file", func(c *Config) any { return c.Fabrics[0].OpenSM.LogFile }},
	{"opensm", "check_interval", func(c *Config) any { return c.Fabrics[0].OpenSM.CheckInterval }},
	{"opensm", "sweep_timeout", func(c *Config) any { return c.Fabrics[0].OpenSM.SweepTimeout }},
	{"opensm", "flat_pkey", func(c *Config) any { return c.Fabrics[0].OpenSM.FlatPKey }},
	{"opensm", "default_partition", func(c *Config) any { return c.Fabrics[0].OpenSM.DefaultPartition }},
	{"opensm", "hardening", func(c *Config) any { return c.Fabrics[0].OpenSM.Hardening.Groups }},
	{"opensm", "m_key_protection_level", func(c *Config) any { return c.Fabrics[0].OpenSM.Hardening.MKeyProtectionLevel }},
	{"opensm", "m_key_lease_period", func(c *Config) any { return c.Fabrics[0].OpenSM.Hardening.MKeyLeasePeriod }},
	{"opensm", "switch_pkey_capacity", func(c *Config) any { return c.Fabrics[0].OpenSM.SwitchPKeyCapacity }},
	{"opensm", "shared_default_partition", func(c *Config) any { return c.Fabrics[0].OpenSM.SharedDefaultPartition }},
	{"opensm", "partitions_template", func(c *Config) any { return c.Fabrics[0].OpenSM.PartitionsTemplate }},

	{"opensm", "verify", func(c *Config) any { return c.Fabrics[0].OpenSM.Verify }},
	{"opensm", "verify_timeout", func(c *Config) any { return c.Fabrics[0].OpenSM.VerifyTimeout }},
	{"opensm", "smp_port", func(c *Config) any { return c.Fabrics[0].OpenSM.SMPPort }},
	{"opensm", "audit_interval", func(c *Config) any { return c.Fabrics[0].OpenSM.AuditInterval }},
}

// diffFabrics names, for the further fabrics, a fabric added or removed by
// its section alone ("[fabric:storage]"), and the keys changed in a fabric in
// both as its sections write them ("[fabric:storage] config_dir",
// "[fabric:storage:ufm_pkeys] password"). Every fabric key needs a restart:
// a fabric's OpenSM, applier and lease are set up when the manager starts.
func diffFabrics(a, b []Fabric) []string {
	var out []string
	find := func(fs []Fabric, name string) (Fabric, bool) {
		i := slices.IndexFunc(fs, func(f Fabric) bool { return f.Name == name })
		if i < 0 {
			return Fabric{}, false
		}
		return fs[i], true
	}
	for _, fa := range a {
		fb, ok := find(b, fa.Name)
		if !ok {
			out = append(out, fa.Section())
			continue
		}
		out = append(out, diffFabric(fa, fb)...)
	}
	for _, fb := range b {
		if _, ok := find(a, fb.Name); !ok {
			out = append(out, fb.Section())
		}
	}
	return out
}

// diffFabric names the keys of one fabric that differ between a and b, with
// the getters of [opensm] and [ufm_pkeys] applied to a scratch Config holding
// the fabric alone, as the fabric's fields were read.
func diffFabric(a, b Fabric) []string {
	var out []string
	ca, cb := Config{Fabrics: []Fabric{a}}, Config{Fabrics: []Fabric{b}}
	if !slices.Equal(a.PhysicalNetworks, b.PhysicalNetworks) {
		out = append(out, a.Section()+" physical_networks")
	}
	if a.UFMPKeys.Listen != b.UFMPKeys.Listen {
		out = append(out, a.UFMPKeysSection()+" listen") // a key of the fabric's section alone
	}
	for _, k := range keyGetters {
		if reflect.DeepEqual(k.get(&ca), k.get(&cb)) {
			continue
		}
		switch k.section {
		case "opensm":
			out = append(out, a.Section()+" "+k.key)
		case "ufm_pkeys":
			out = append(out, a.UFMPKeysSection()+" "+k.key)
		}
	}
	return append(out, diffOpenSMConf(a.OpenSMConfSection(), a.OpenSMConf, b.OpenSMConf)...)
}
