package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
)

// section is one section of the file the parser knows, with its keys in the order
// the sample file documents them.
type section struct {
	name   string
	fields []field
}

// field is one key: its default, as it would be written in the file, and how a
// value is checked and stored. set returns an error that says what is expected;
// the caller adds the section, key, value and line.
type field struct {
	key    string
	def    string // "" when the key has no default
	secret bool   // the value is never shown, not even in errors
	redact func(value string) string
	set    func(c *Config, value string) error
}

// show is how an error quotes the value of f.
func (f field) show(value string) string {
	switch {
	case f.secret:
		return "(not shown)"
	case f.redact != nil:
		return strconv.Quote(f.redact(value))
	default:
		return strconv.Quote(value)
	}
}

// into is the set of a key whose value parse checks and stores in the field
// of Config that at points to.
func into[T any](parse func(dst *T, value string) error, at func(c *Config) *T) func(c *Config, value string) error {
	return func(c *Config, value string) error { return parse(at(c), value) }
}

// setString stores a value any string may be.
func setString(dst *string, v string) error {
	*dst = v
	return nil
}

// intWithin is setInt with its check.
func intWithin(check func(int) error) func(dst *int, v string) error {
	return func(dst *int, v string) error { return setInt(dst, v, check) }
}

// opensmConfSection passes its keys through to opensm.conf, so it has no fixed keys.
const opensmConfSection = "opensm_conf"

// sections lists every section and key the parser knows, with their defaults. The
// sample file documents each of them; a test checks that it does. The keys of
// a fabric ([opensm], [ufm_pkeys], [api] physical_networks) store into the
// first fabric of the Config they are applied to: the default fabric of the
// file, or the one fabric a further fabric's section is read into
// (applyToFabric).
var sections = []section{
	{name: "api", fields: []field{
		{key: "listen", def: "127.0.0.1:8090", set: into(setListen, func(c *Config) *string { return &c.API.Listen })},
		{key: "prefix", def: "/ufmRestV3", set: into(setPrefix, func(c *Config) *string { return &c.API.Prefix })},
		{key: "domain", def: "cloudx", set: into(setDomain, func(c *Config) *string { return &c.API.Domain })},
		{key: "token", secret: true, set: into(setString, func(c *Config) *string { return &c.API.Token })},
		{key: "previous_tokens", secret: true,
			set: into(setSecretList, func(c *Config) *[]string { return &c.API.PreviousTokens })},
		{key: "physical_networks", def: "*",
			set: into(setPhysicalNetworks, func(c *Config) *[]string { return &c.Fabrics[0].PhysicalNetworks })},
		{key: "reserved_guids", set: into(setReservedGUIDs, func(c *Config) *[]fabric.GUID { return &c.API.ReservedGUIDs })},
		{key: "tls_cert_file", set: into(setAbsPath, func(c *Config) *string { return &c.API.TLSCertFile })},
		{key: "tls_key_file", set: into(setAbsPath, func(c *Config) *string { return &c.API.TLSKeyFile })},
		{key: "check_host", def: "false", set: into(setBool, func(c *Config) *bool { return &c.API.CheckHost })},
		{key: "access_log", def: "false", set: into(setBool, func(c *Config) *bool { return &c.API.AccessLog })},
		{key: "metrics_listen", set: into(setListen, func(c *Config) *string { return &c.API.MetricsListen })},
		{key: "metrics_token", secret: true, set: into(setString, func(c *Config) *string { return &c.API.MetricsToken })},
		{key: "debug_listen", set: into(setListen, func(c *Config) *string { return &c.API.DebugListen })},
		{key: "max_stored_request_bytes", def: strconv.Itoa(DefaultAPIMaxStoredRequestBytes),
			set: into(intWithin(quotaBound), func(c *Config) *int { return &c.API.Quota.MaxStoredRequestBytes })},
		{key: "max_jobs_per_minute", def: strconv.Itoa(DefaultAPIMaxJobsPerMinute),
			set: into(intWithin(quotaBound), func(c *Config) *int { return &c.API.Quota.MaxJobsPerMinute })},
	}},
	{name: "ufm_pkeys", fields: []field{
		{key: "username", set: func(c *Config, v string) error {
			if strings.ContainsAny(v, ":") {
				return errors.New("a Basic auth user name cannot hold ':'")
			}
			c.Fabrics[0].UFMPKeys.Username = v
			return nil
		}},
		{key: "password", secret: true, set: into(setString, func(c *Config) *string { return &c.Fabrics[0].UFMPKeys.Password })},
		{key: "previous_passwords", secret: true,
			set: into(setSecretList, func(c *Config) *[]string { return &c.Fabrics[0].UFMPKeys.PreviousPasswords })},
		{key: "prefix", def: "/ufmRest", set: into(setPrefix, func(c *Config) *string { return &c.Fabrics[0].UFMPKeys.Prefix })},
		{key: "pkey_range", set: into(setPKeyRange, func(c *Config) *fabric.PKeyRange { return &c.Fabrics[0].UFMPKeys.PKeyRange })},
		{key: "apply_timeout", def: "30",
			set: into(setSeconds, func(c *Config) *time.Duration { return &c.Fabrics[0].UFMPKeys.ApplyTimeout })},
		{key: "max_guids_per_request", def: strconv.Itoa(DefaultMaxGUIDsPerRequest),
			set: into(intWithin(kubernetesLimit), func(c *Config) *int { return &c.Fabrics[0].UFMPKeys.MaxGUIDsPerRequest })},
		{key: "max_members_per_pkey", def: strconv.Itoa(DefaultMaxMembersPerPKey),
			set: into(intWithin(kubernetesLimit), func(c *Config) *int { return &c.Fabrics[0].UFMPKeys.MaxMembersPerPKey })},
		{key: "max_members", def: strconv.Itoa(DefaultMaxMembers),
			set: into(intWithin(kubernetesLimit), func(c *Config) *int { return &c.Fabrics[0].UFMPKeys.MaxMembers })},
		{key: "max_concurrent_requests", def: strconv.Itoa(DefaultMaxConcurrentRequests),
			set: into(intWithin(concurrencyLimit), func(c *Config) *int { return &c.Fabrics[0].UFMPKeys.MaxConcurrentRequests })},
		{key: "max_stored_request_bytes", def: strconv.Itoa(DefaultPKeysMaxStoredRequestBytes),
			set: into(intWithin(quotaBound), func(c *Config) *int { return &c.Fabrics[0].UFMPKeys.Quota.MaxStoredRequestBytes })},
		{key: "max_jobs_per_minute", def: strconv.Itoa(DefaultPKeysMaxJobsPerMinute),
			set: into(intWithin(quotaBound), func(c *Config) *int { return &c.Fabrics[0].UFMPKeys.Quota.MaxJobsPerMinute })},
	}},
	{name: "neutron", fields: []field{
		{key: "clouds_file", set: into(setString, func(c *Config) *string { return &c.Neutron.CloudsFile })},
		{key: "cloud", set: into(setString, func(c *Config) *string { return &c.Neutron.Cloud })},
	}},
	{name: "log", fields: []field{
		{key: "format", def: "json", set: func(c *Config, v string) error {
			if v != "json" && v != "text" {
				return errors.New(`want "json" (one JSON object a line, for machines) or "text" (for people)`)
			}
			c.Log.Format = v
			return nil
		}},
	}},
	{name: "database", fields: []field{
		{key: "connection", def: "sqlite:////var/lib/alternative-fabric-manager/afm.db", redact: RedactURL,
			set: func(c *Config, v string) error {
				if _, err := parseConnection(v); err != nil {
					return err
				}
				c.Database.Connection = v
				return nil
			}},
		{key: "auto_migrate", def: "true", set: into(setBool, func(c *Config) *bool { return &c.Database.AutoMigrate })},
		{key: "poll_interval", def: "1",
			set: into(setSeconds, func(c *Config) *time.Duration { return &c.Database.PollInterval })},
		{key: "job_retention", def: "7d",
			set: into(setRetention, func(c *Config) *time.Duration { return &c.Database.JobRetention })},
	}},
	{name: "ha", fields: []field{
		{key: "ha", def: "false", set: into(setBool, func(c *Config) *bool { return &c.HA.HA })},
		{key: "lease_timeout", def: "30", set: func(c *Config, v string) error {
			if err := setSeconds(&c.HA.LeaseTimeout, v); err != nil {
				return err
			}
			if c.HA.LeaseTimeout < MinLeaseTimeout {
				return fmt.Errorf("want at least %g seconds: the leader renews every fifth of it", MinLeaseTimeout.Seconds())
			}
			return nil
		}},
	}},
	{name: "opensm", fields: []field{
		{key: "driver", def: DriverProcess, set: func(c *Config, v string) error {
			if !slices.Contains(Drivers, v) {
				return fmt.Errorf("want one of %s", strings.Join(Drivers, ", "))
			}
			c.Fabrics[0].OpenSM.Driver = v
			return nil
		}},
		// The managed and docker drivers' containers; see etc/afm.conf.sample.
		{key: "container", def: "opensm",
			set: into(setContainerName, func(c *Config) *string { return &c.Fabrics[0].OpenSM.Container })},
		{key: "manager_container", def: "alternative-fabric-manager",
			set: into(setContainerName, func(c *Config) *string { return &c.Fabrics[0].OpenSM.ManagerContainer })},
		{key: "image", set: into(setString, func(c *Config) *string { return &c.Fabrics[0].OpenSM.Image })},
		{key: "command", def: "opensm", set: func(c *Config, v string) error {
			words, err := splitCommand(v)
			if err != nil {
				return fmt.Errorf("want the executable and its arguments, quoted as in a shell: %w", err)
			}
			c.Fabrics[0].OpenSM.Command = words
			return nil
		}},
		{key: "user", set: into(setUserName, func(c *Config) *string { return &c.Fabrics[0].OpenSM.User })},
		{key: "env_file", set: into(setAbsPath, func(c *Config) *string { return &c.Fabrics[0].OpenSM.EnvFile })},
		{key: "config_dir", def: "/var/lib/alternative-fabric-manager/opensm",
			set: into(setAbsPath, func(c *Config) *string { return &c.Fabrics[0].OpenSM.ConfigDir })},
		// The default, <config_dir>/opensm.log, depends on config_dir: Parse sets it.
		{key: "log_file", set: into(setAbsPath, func(c *Config) *string { return &c.Fabrics[0].OpenSM.LogFile })},
		{key: "check_interval", def: "60",
			set: into(setSeconds, func(c *Config) *time.Duration { return &c.Fabrics[0].OpenSM.CheckInterval })},
		{key: "sweep_timeout", def: "60",
			set: into(setSeconds, func(c *Config) *time.Duration { return &c.Fabrics[0].OpenSM.SweepTimeout })},
		{key: "flat_pkey", def: "0x7ffe",
			set: into(setFlatPKey, func(c *Config) *fabric.PKey { return &c.Fabrics[0].OpenSM.FlatPKey })},
		// The file format already keeps values to one line.
		{key: "default_partition", def: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
			set: into(setString, func(c *Config) *string { return &c.Fabrics[0].OpenSM.DefaultPartition })},
		{key: "hardening", def: opensm.HardeningAll, set: func(c *Config, v string) error {
			groups, err := opensm.ParseGroups(v)
			if err != nil {
				return err
			}
			c.Fabrics[0].OpenSM.Hardening.Groups = groups
			return nil
		}},
		{key: "m_key_protection_level", def: strconv.Itoa(opensm.DefaultMKeyProtectionLevel),
			set: into(intWithin(opensm.CheckMKeyProtectionLevel), func(c *Config) *int { return &c.Fabrics[0].OpenSM.Hardening.MKeyProtectionLevel })},
		{key: "m_key_lease_period", def: strconv.Itoa(opensm.DefaultMKeyLeasePeriod),
			set: into(intWithin(opensm.CheckMKeyLeasePeriod), func(c *Config) *int { return &c.Fabrics[0].OpenSM.Hardening.MKeyLeasePeriod })},
		// 32 entries is one block of the table, the least a switch port that
		// enforces can have in whole blocks: OpenSM clears enforcement silently
		// once a host port's pkeys fill the port's blocks (opensm-reference
		// §3.3), so the smallest table is the safe guess. Fabrics with larger
		// tables (PartEnforceCap in smpquery switchinfo; ibsim has 64) raise it.
		{key: "switch_pkey_capacity", def: "32",
			set: into(setSwitchPKeyCapacity, func(c *Config) *int { return &c.Fabrics[0].OpenSM.SwitchPKeyCapacity })},
		{key: "shared_default_partition", def: "false",
			set: into(setBool, func(c *Config) *bool { return &c.Fabrics[0].OpenSM.SharedDefaultPartition })},
		// No default: the built-in template. The file is read at start-up.
		{key: "partitions_template", set: into(setAbsPath, func(c *Config) *string { return &c.Fabrics[0].OpenSM.PartitionsTemplate })},

		// The read-back proof of jobs (docs/isolation-proof.md).
		{key: "verify", def: VerifyTables, set: func(c *Config, v string) error {
			if v != VerifyTables && v != VerifyLog {
				return fmt.Errorf("want %s (the ports' P_Key tables are read back before a job completes) or %s (OpenSM's log alone)",
					VerifyTables, VerifyLog)
			}
			c.Fabrics[0].OpenSM.Verify = v
			return nil
		}},
		{key: "verify_timeout", def: "60",
			set: into(setSeconds, func(c *Config) *time.Duration { return &c.Fabrics[0].OpenSM.VerifyTimeout })},
		{key: "smp_port", set: into(setSMPPort, func(c *Config) *string { return &c.Fabrics[0].OpenSM.SMPPort })},
		// The continuous audit (internal/audit). 0 turns it off.
		{key: "audit_interval", def: "300",
			set: into(setSecondsOrOff, func(c *Config) *time.Duration { return &c.Fabrics[0].OpenSM.AuditInterval })},
	}},
}

// MinLeaseTimeout is the shortest [ha] lease_timeout: a fifth of it is the
// renewal interval, which each database round trip must fit in.
const MinLeaseTimeout = time.Second

func sectionNames() string {
	names := make([]string, 0, len(sections)+1)
	for _, s := range sections {
		names = append(names, "["+s.name+"]")
	}
	names = append(names, "["+opensmConfSection+"]", "[fabric:NAME]", "[fabric:NAME:opensm_conf]", "[fabric:NAME:ufm_pkeys]",
		"["+pkeysClientPrefix+"NAME]")
	return strings.Join(names, ", ")
}

func (s section) keyNames() string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = f.key
	}
	return strings.Join(names, ", ")
}

func setListen(dst *string, v string) error {
	const want = "want host:port, such as 127.0.0.1:8090"
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New(want)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New(want + ", with a port from 0 to 65535")
	}
	*dst = v
	return nil
}

func setPrefix(dst *string, v string) error {
	switch {
	case !strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/"):
		return errors.New("want a path that starts with '/' and does not end with one, such as /ufmRestV3")
	case strings.Contains(v, "//"):
		return errors.New("want a path without empty segments ('//')")
	case strings.ContainsAny(v, " \t?#%:*"):
		// ':' and '*' would make httprouter read a segment as a parameter.
		return errors.New("want a plain path: no blanks and none of ? # % : *")
	}
	*dst = v
	return nil
}

// domainPattern keeps the domain to characters that stand for themselves in a URL
// path and in an httprouter route.
var domainPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

func setDomain(dst *string, v string) error {
	if !domainPattern.MatchString(v) || v == "." || v == ".." {
		return errors.New("want one path segment of letters, digits, '.', '_', '~' or '-', such as cloudx")
	}
	*dst = v
	return nil
}

// physnetPattern is a Neutron physical network name as it can sit in a
// comma-separated list: no blanks, no commas.
var physnetPattern = regexp.MustCompile(`^[^\s,*]+$`)

// setSecretList reads a comma-separated list of secrets. Errors say where a
// value is wrong, never what it is.
func setSecretList(dst *[]string, v string) error {
	var values []string
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return fmt.Errorf("entry %d is empty: want a comma-separated list", i+1)
		case slices.Contains(values, s):
			return fmt.Errorf("entry %d repeats an earlier one", i+1)
		}
		values = append(values, s)
	}
	*dst = values
	return nil
}

// setReservedGUIDs reads [api] reserved_guids strictly: each GUID written
// whole, 0x and 16 hex digits, none zero, none twice. A GUID written short
// (a digit dropped) would reserve another port than the one meant, and leave
// that one to the tenants.
func setReservedGUIDs(dst *[]fabric.GUID, v string) error {
	var guids []fabric.GUID
	if strings.TrimSpace(v) == "" {
		*dst = nil
		return nil
	}
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if !fullGUIDPattern.MatchString(s) {
			return fmt.Errorf("entry %d, %q: want a comma-separated list of GUIDs, each 0x and 16 hex digits", i+1, s)
		}
		g, err := fabric.ParseGUID(strings.ToLower(s))
		switch {
		case err != nil:
			return fmt.Errorf("entry %d: %w", i+1, err)
		case g == 0:
			return fmt.Errorf("entry %d is the zero GUID, which no port has", i+1)
		case slices.Contains(guids, g):
			return fmt.Errorf("entry %d, GUID %s, is listed twice", i+1, g)
		}
		guids = append(guids, g)
	}
	*dst = guids
	return nil
}

// fullGUIDPattern is a GUID written whole.
var fullGUIDPattern = regexp.MustCompile(`^0[xX][0-9a-fA-F]{16}$`)

func setPhysicalNetworks(dst *[]string, v string) error {
	if strings.TrimSpace(v) == "*" {
		*dst = []string{"*"}
		return nil
	}
	var names []string
	seen := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "*":
			return errors.New("want either * alone or a list of physical network names, not both")
		case !physnetPattern.MatchString(name):
			return fmt.Errorf("physical network %q: want a comma-separated list of names without blanks, such as ibnet,ibnet2, or *", name)
		case seen[name]:
			return fmt.Errorf("physical network %q is listed twice", name)
		}
		seen[name] = true
		names = append(names, name)
	}
	*dst = names
	return nil
}

// setBool reads the words Python's configparser reads as booleans, so that files
// written for a configparser-based tool keep their meaning.
func setBool(dst *bool, v string) error {
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1":
		*dst = true
	case "false", "no", "off", "0":
		*dst = false
	default:
		return errors.New("want true or false (yes/no, on/off and 1/0 also work)")
	}
	return nil
}

// maxSeconds bounds every interval: a longer one is surely a mistake, and the bound
// keeps the conversion to time.Duration far from overflowing.
const maxSeconds = 86400

func setSeconds(dst *time.Duration, v string) error {
	want := fmt.Sprintf("want a number of seconds greater than 0 and at most %d, such as 60 or 0.5", maxSeconds)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > maxSeconds {
		return errors.New(want)
	}
	d := time.Duration(math.Round(f * float64(time.Second)))
	if d < time.Millisecond {
		return errors.New(want + ", and at least 0.001")
	}
	*dst = d
	return nil
}

// setSMPPort checks a local HCA port's name, "<device>:<port>" as
// infiniband-diags' -C and -P name it, or "" for OpenSM's own port.
func setSMPPort(dst *string, v string) error {
	const want = "want a local HCA port as <device>:<port number>, such as mlx5_0:1, or nothing for the port OpenSM's guid names"
	if v == "" {
		*dst = v
		return nil
	}
	dev, port, ok := strings.Cut(v, ":")
	if n, err := strconv.Atoi(port); !ok || err != nil || n < 1 || n > 254 || !smpDevice.MatchString(dev) {
		return errors.New(want)
	}
	*dst = v
	return nil
}

// smpDevice is an HCA's name as the kernel gives it (mlx5_0, ibp59s0).
var smpDevice = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)

// setSecondsOrOff is setSeconds, or 0: off.
func setSecondsOrOff(dst *time.Duration, v string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil && f == 0 {
		*dst = 0
		return nil
	}
	if err := setSeconds(dst, v); err != nil {
		return fmt.Errorf("%w, or 0 (off)", err)
	}
	return nil
}

// kubernetesLimit checks a bound on Kubernetes GUIDs or members.
func kubernetesLimit(n int) error {
	if n < 1 || n > maxKubernetesMembers {
		return fmt.Errorf("want a number of GUIDs from 1 to %d", maxKubernetesMembers)
	}
	return nil
}

// concurrencyLimit checks [ufm_pkeys] max_concurrent_requests.
func concurrencyLimit(n int) error {
	if n < 1 || n > 1000 {
		return errors.New("want a number of requests from 1 to 1000")
	}
	return nil
}

// quotaBound checks a quota's bound: 0 (none) or more.
func quotaBound(n int) error {
	if n < 0 {
		return errors.New("want 0 (no bound) or a positive decimal integer")
	}
	return nil
}

// setInt reads a decimal integer and checks it with check, whose error says
// what is wanted.
func setInt(dst *int, v string, check func(int) error) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		if err := check(-1); err != nil {
			return err
		}
		return errors.New("want a decimal integer")
	}
	if err := check(n); err != nil {
		return err
	}
	*dst = n
	return nil
}

// Bounds of job_retention. Jobs must stay readable well beyond the time
// networking-mlnx polls them (a day at least); ten years is surely a mistake.
const (
	minRetention = 24 * time.Hour
	maxRetention = 3650 * 24 * time.Hour
)

// retentionValue is a whole number of seconds, optionally followed by a unit:
// s, m (minutes), h or d (days of 24 hours).
var retentionValue = regexp.MustCompile(`^([0-9]{1,10})([smhd]?)$`)

func setRetention(dst *time.Duration, v string) error {
	want := errors.New("want a whole number of days (7d), hours (36h), minutes (2880m) or seconds (86400 or 86400s), from 1d to 3650d")
	m := retentionValue.FindStringSubmatch(v)
	if m == nil {
		return want
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return want
	}
	unit := map[string]time.Duration{"": time.Second, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
	// Compared before multiplying, which could overflow.
	if n > int64(maxRetention/unit) || time.Duration(n)*unit < minRetention {
		return want
	}
	*dst = time.Duration(n) * unit
	return nil
}

func setAbsPath(dst *string, v string) error {
	// The manager is a service: a relative path would depend on the directory it
	// happens to be started from.
	if !filepath.IsAbs(v) {
		return errors.New("want an absolute path")
	}
	// A path may hold '#', but after a blank it is a comment that was
	// meant to end the value: comments go on lines of their own.
	if i := strings.IndexFunc(v, unicode.IsSpace); i >= 0 && strings.Contains(v[i:], "#") {
		return errors.New("want an absolute path, without a trailing comment: comments go on lines of their own")
	}
	*dst = filepath.Clean(v)
	return nil
}

var pkeyPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{1,4}$`)

func setFlatPKey(dst *fabric.PKey, v string) error {
	want := fmt.Sprintf("want a partition key in hexadecimal from 0x0001 to %s, such as 0x7ffe", fabric.MaxNetworkPKey)
	if !pkeyPattern.MatchString(v) {
		return errors.New(want)
	}
	n, err := strconv.ParseUint(v[2:], 16, 16)
	if err != nil || n == 0 || fabric.PKey(n) > fabric.MaxNetworkPKey {
		return errors.New(want)
	}
	*dst = fabric.PKey(n)
	return nil
}

// setPKeyRange reads "0x1000-0x1fff": two pkeys, the first not above the last.
func setPKeyRange(dst *fabric.PKeyRange, v string) error {
	want := errors.New("want two partition keys in hexadecimal from 0x0001 to 0x7ffe, the first not above the last, such as 0x1000-0x1fff")
	first, last, ok := strings.Cut(v, "-")
	if !ok {
		return want
	}
	var r fabric.PKeyRange
	for _, p := range []struct {
		text string
		dst  *fabric.PKey
	}{{strings.TrimSpace(first), &r.First}, {strings.TrimSpace(last), &r.Last}} {
		if err := setFlatPKey(p.dst, p.text); err != nil {
			return want
		}
	}
	if r.First > r.Last {
		return want
	}
	*dst = r
	return nil
}

func setSwitchPKeyCapacity(dst *int, v string) error {
	// PartEnforceCap is a 16-bit field; a port always carries the default
	// partition and its own, so a capacity under 2 would refuse every port.
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 65535 {
		return errors.New("want the number of entries of a switch port's pkey table (PartEnforceCap), from 2 to 65535, such as 32 or 64")
	}
	*dst = n
	return nil
}

// opensmOptionPattern is the shape of OpenSM's option names. OpenSM reads the name
// up to the first blank, so anything else would not reach it as written.
var opensmOptionPattern = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// applyOpenSMConf keeps [opensm_conf] in file order, refusing the options the
// manager owns.
func (c *Config) applyOpenSMConf(s iniSection) []error {
	var errs []error
	c.Fabrics[0].OpenSMConf, errs = readOpenSMConf(s, c.Fabrics[0].OpenSMConf, errs)
	return errs
}

// readOpenSMConf appends the options of s, a section of opensm.conf options,
// to kvs, and its errors to errs.
func readOpenSMConf(s iniSection, kvs []KeyValue, errs []error) ([]KeyValue, []error) {
	for _, e := range s.entries {
		switch {
		case slices.ContainsFunc(OwnedOpenSMOptions, func(owned string) bool { return strings.EqualFold(owned, e.key) }):
			errs = append(errs, fmt.Errorf("[%s] %s (line %d): the manager sets this option itself; remove the line",
				s.name, e.key, e.line))
		case !opensmOptionPattern.MatchString(e.key):
			errs = append(errs, fmt.Errorf("[%s] key %q (line %d): want an OpenSM option name (letters, digits, '_')",
				s.name, e.key, e.line))
		case e.value == "":
			errs = append(errs, fmt.Errorf("[%s] %s (line %d): empty value; remove the line to keep OpenSM's default",
				s.name, e.key, e.line))
		case opensm.CheckOption(e.key, e.value) != nil:
			errs = append(errs, fmt.Errorf("[%s] %s (line %d): %w", s.name, e.key, e.line, opensm.CheckOption(e.key, e.value)))
		default:
			kvs = append(kvs, KeyValue{Key: e.key, Value: e.value})
		}
	}
	return kvs, errs
}

// checkHardening applies the rules between keys that the hardening groups add
// to fabric f, once every section is read (sections may come in any order):
//
//   - an option of its opensm.conf options that a group on owns is refused,
//     naming the group (the manager writes it);
//   - with default_partition on, the default partition may not make ALL or
//     ALL_CAS full members: every port could then reach every other one there.
func checkHardening(f Fabric, file iniFile) []error {
	var errs []error
	for _, s := range file.sections {
		if "["+s.name+"]" != f.OpenSMConfSection() {
			continue
		}
		for _, e := range s.entries {
			if g := opensm.OptionGroup(e.key); g != "" && f.OpenSM.Hardening.Has(g) {
				errs = append(errs, fmt.Errorf("[%s] %s (line %d): the hardening group %s sets this option; "+
					"remove the line, or take %s out of %s hardening", s.name, e.key, e.line, g, g, f.Section()))
			}
		}
	}
	// shared_default_partition is the operator saying, knowingly, that ports rely
	// on full membership of the default partition (docs/opensm-hardening.md).
	if f.OpenSM.Hardening.Has(opensm.GroupDefaultPartition) && !f.OpenSM.SharedDefaultPartition {
		errs = append(errs, checkLimitedDefaultPartition(f.Section(), f.OpenSM.DefaultPartition)...)
	}
	return errs
}

// checkLimitedDefaultPartition refuses a default partition that makes ALL or
// ALL_CAS full members. A line that does not parse is left to the check of the
// rendered partitions file, which reports it in full.
func checkLimitedDefaultPartition(section, line string) []error {
	f, err := partitions.Parse([]byte(line))
	if err != nil {
		return nil
	}
	var errs []error
	for _, st := range f.Statements {
		if st.PKey != fabric.DefaultPKey {
			continue
		}
		for _, m := range st.Members {
			if (m.Keyword == partitions.All || m.Keyword == partitions.AllCAs) && m.Membership == partitions.Full {
				errs = append(errs, fmt.Errorf("%s default_partition: %s=full makes every port a full member of "+
					"the default partition, where tenants could reach each other; the hardening group %s refuses it: "+
					"make it %s=limited, SELF=full, or set %s shared_default_partition = true", section, m.Keyword, opensm.GroupDefaultPartition, m.Keyword, section))
			}
		}
	}
	return errs
}

// containerName is what Docker accepts as a container's name.
var containerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// userName is what useradd accepts (its default NAME_REGEX, with upper case
// and dots), so that a typo such as a blank is refused at load.
var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*[$]?$`)

func setUserName(dst *string, v string) error {
	if v != "" && !userName.MatchString(v) {
		return errors.New("want a user name (such as afm-opensm), or nothing for the manager's own user")
	}
	*dst = v
	return nil
}

func setContainerName(dst *string, v string) error {
	if !containerName.MatchString(v) {
		return errors.New("want a Docker container name: letters, digits, '_', '.', '-', starting with a letter or digit")
	}
	*dst = v
	return nil
}
