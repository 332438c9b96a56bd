// Package config reads the manager's INI file, afm.conf: its sections, their
// defaults, and the checks that make a bad file fail at start-up, with an error
// naming the key, rather than later, in the middle of an apply.
//
// Unknown sections and keys are errors: a misspelt key would otherwise fall back
// to its default without a word. Errors never quote the API token, nor any
// password in the database URL.
package config

import (
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"

	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// DefaultPath is where the manager reads its configuration unless told otherwise.
const DefaultPath = "/etc/alternative-fabric-manager/afm.conf"

// Config is the whole configuration file, defaults applied and checked.
type Config struct {
	API      API
	Log      Log
	Database Database
	HA       HA
	// Neutron is [neutron]: where --import-neutron reads Neutron's API.
	Neutron Neutron
	// Fabrics are every fabric, each with all of its settings: the default
	// fabric first (named DefaultFabric; the file's [opensm], [opensm_conf],
	// [ufm_pkeys] and [api] physical_networks), then the [fabric:NAME]
	// sections in file order. Parse and Default always give the default one.
	Fabrics []Fabric
	// PKeysClients are the [ufm_pkeys:NAME] sections, in file order: pkeys
	// clients beside ib-kubernetes, each its own principal (pkeysclients.go).
	PKeysClients []PKeysClient
	// File is the file the server read its configuration from (set by the
	// server, "" elsewhere): the process driver hides its directory from
	// OpenSM run as its own user.
	File string
}

// Neutron is [neutron]: the cloud of a clouds.yaml whose Neutron
// --import-neutron reads (docs/neutron-import.md). The manager itself never
// talks to Neutron.
type Neutron struct {
	// CloudsFile is the clouds.yaml; it holds the credential, so the
	// manager's configuration does not.
	CloudsFile string
	Cloud      string
}

// HA is [ha]: whether other managers share the database.
type HA struct {
	// HA false: this manager is the only one on its database. OpenSM then
	// runs for the manager's whole life, through database outages; true:
	// OpenSM runs only while this manager holds the lease (docs/ha.md).
	HA bool
	// LeaseTimeout is how long a leader's lease lasts without renewal; it
	// renews every fifth of it and stops its OpenSM after half of it without a
	// renewal.
	LeaseTimeout time.Duration
}

// API is [api]: where the REST API networking-mlnx talks to is served.
type API struct {
	Listen string // host:port
	Prefix string // URL path prefix of every route, such as /ufmRestV3
	Domain string // path segment networking-mlnx puts after the prefix, such as cloudx
	Token  string // what networking-mlnx sends as "Authorization: Basic <token>"
	// PreviousTokens are accepted beside Token while a new token reaches
	// every neutron-server: a rotation without a refused request.
	PreviousTokens []string
	// TLSCertFile and TLSKeyFile, both or neither: the API is served over
	// HTTPS (TLS 1.2 or newer), the files read again when they change.
	TLSCertFile, TLSKeyFile string
	// MetricsListen serves /metrics on its own host:port; "" serves it on the
	// API's listener.
	MetricsListen string
	// MetricsToken, when set, is what a scraper must send as
	// "Authorization: Bearer <token>"; "" leaves /metrics open on a loopback
	// listener and refuses every scrape on any other (MetricsOpen).
	MetricsToken string
	// DebugListen serves Go's pprof on its own host:port, a loopback one;
	// "" (the default) serves it nowhere. Never on the API's listener.
	DebugListen string
	// AccessLog logs every request at info level; otherwise only refusals and
	// errors are, and the rest at debug level.
	AccessLog bool
	// ReservedGUIDs are GUIDs no client may name, on either API, on any
	// fabric: the operator's own ports (a management HCA, a storage
	// server's) besides the subnet managers' ports and the switches, which
	// the manager refuses by itself.
	ReservedGUIDs []fabric.GUID
	// CheckHost refuses a networking-mlnx port whose GUID is a confirmed
	// host's port (--confirm-hosts) while its binding:host_id names
	// another host (docs/security.md, "Ports tied to their hosts").
	CheckHost bool

	// Quota bounds what networking-mlnx's changes store.
	Quota Quota
}

// Quota is a principal's bounds on what its changes store (max_stored_request_bytes,
// max_jobs_per_minute): a change over either is answered 429 with
// Retry-After; 0 bounds nothing.
type Quota struct {
	// MaxStoredRequestBytes bounds the bytes of the requests its jobs keep,
	// of the jobs created over [database] job_retention.
	MaxStoredRequestBytes int
	// MaxJobsPerMinute bounds the jobs it creates in a minute.
	MaxJobsPerMinute int
}

// Defaults of the quotas. networking-mlnx's bodies are a few KiB: a GiB is
// some 300,000 jobs, a week of a busy cloud's ports many times over. Its
// changes a minute are not bounded by default: they are neutron-server's,
// whose own quotas bound its tenants, and a boot storm is thousands of port
// changes in a minute that a bound would answer 429, keeping ports DOWN (the
// bytes bound the disk all the same). ib-kubernetes sends one change at a
// time and waits for its apply.
const (
	DefaultAPIMaxStoredRequestBytes   = 1 << 30
	DefaultAPIMaxJobsPerMinute        = 0
	DefaultPKeysMaxStoredRequestBytes = 256 << 20
	DefaultPKeysMaxJobsPerMinute      = 600
)

// UFMPKeys is [ufm_pkeys]: UFM's pkeys REST API as Kubernetes' ib-kubernetes
// uses it, served on the API's listener when a user name and password are set
// (docs/kubernetes.md).
type UFMPKeys struct {
	// Username and Password are what ib-kubernetes sends as HTTP Basic auth
	// (UFM_USERNAME, UFM_PASSWORD). Both or neither: neither serves no route.
	Username, Password string
	// PreviousPasswords are accepted beside Password (with Username) while a
	// new password reaches ib-kubernetes: a rotation without a refused request.
	PreviousPasswords []string
	// Prefix is the path prefix of its routes, UFM's /ufmRest.
	Prefix string
	// Listen, of a further fabric's [fabric:NAME:ufm_pkeys] only, serves its
	// routes on a listener of their own (host:port) instead of [api] listen:
	// ib-kubernetes always sends /ufmRest, which the default fabric's
	// routes hold there. "" serves them on [api] listen under Prefix.
	Listen string
	// PKeyRange holds the only pkeys Kubernetes partitions may use, and no
	// Neutron VLAN may; required when the API is served.
	PKeyRange fabric.PKeyRange
	// ApplyTimeout is how long a change's answer waits for OpenSM to apply
	// it; it answers 200 after that anyway (the change is recorded).
	ApplyTimeout time.Duration
	// MaxGUIDsPerRequest bounds the GUIDs of one request (413 beyond it):
	// a change holds the revision's lock, which networking-mlnx's changes
	// wait for, for as long as its GUIDs take to check.
	MaxGUIDsPerRequest int
	// MaxMembersPerPKey and MaxMembers bound the members of one Kubernetes
	// pkey and of all of them (400 for the change that would pass either):
	// every apply renders and checks them all.
	MaxMembersPerPKey, MaxMembers int
	// MaxConcurrentRequests bounds the pkeys requests served at once, a
	// change's wait for its apply included; the next is answered 503 with
	// Retry-After at once. networking-mlnx's requests are not counted.
	MaxConcurrentRequests int
	// Quota bounds what this client's changes store.
	Quota Quota
}

// Defaults and bounds of the [ufm_pkeys] limits. ib-kubernetes sends one
// request per pkey at a time, with the pods it has gathered since the last;
// a fabric of tens of thousands of pods fits the defaults. Past a million
// members a render takes seconds and hundreds of MB.
const (
	DefaultMaxGUIDsPerRequest    = 10000
	DefaultMaxMembersPerPKey     = 50000
	DefaultMaxMembers            = 100000
	DefaultMaxConcurrentRequests = 4
	maxKubernetesMembers         = 1000000
)

// Enabled says whether the pkeys API is served.
func (u UFMPKeys) Enabled() bool { return u.Username != "" || u.Password != "" }

// Log is [log]: how the manager writes its log (standard error).
type Log struct {
	Format string // "json" (for machines) or "text" (for people)
}

// Database is [database].
type Database struct {
	Connection   string // a URL; see ParseConnection
	AutoMigrate  bool   // apply pending schema migrations at start-up
	PollInterval time.Duration
	// JobRetention is how long a finished job stays readable; the applier
	// deletes it after that.
	JobRetention time.Duration
}

// OpenSM is [opensm]: how the manager runs OpenSM and where their files meet.
type OpenSM struct {
	Driver string // one of Drivers
	// Container is the name of OpenSM's container (drivers managed and docker).
	Container string
	// ManagerContainer is the name of the manager's own container, whose PID
	// namespace and mounts OpenSM's container shares (driver managed).
	ManagerContainer string
	// Image is the image OpenSM's container runs (driver managed); "" for the
	// image of the manager's container.
	Image   string
	Command []string // the executable and its leading arguments
	EnvFile string   // KEY=VALUE lines added to OpenSM's environment; "" for none
	// User is whom the process driver runs OpenSM as ([opensm] user); "" for
	// the manager's own user, which the manager warns of when it is root.
	User             string
	ConfigDir        string // where opensm.conf and partitions.conf are written
	LogFile          string // OpenSM's log, which the manager follows
	CheckInterval    time.Duration
	SweepTimeout     time.Duration
	FlatPKey         fabric.PKey
	DefaultPartition string // the default partition's line, written to partitions.conf as is
	// Hardening is [opensm] hardening, m_key_protection_level and
	// m_key_lease_period: the hardening groups on and the M_Key settings.
	Hardening opensm.Hardening
	// SwitchPKeyCapacity is the number of entries of a switch port's pkey
	// table: a host port may carry at most one fewer pkeys, or OpenSM stops
	// enforcing partitions on the switch port facing it.
	SwitchPKeyCapacity int
	// SharedDefaultPartition lets the default partition make every port a full
	// member (ALL=full), which the partitions check refuses otherwise.
	SharedDefaultPartition bool
	// PartitionsTemplate is the Jinja template partitions.conf is rendered from;
	// "" for the built-in one.
	PartitionsTemplate string

	// Verify is what a job's completion waits for: VerifyTables (the ports'
	// own P_Key tables read back, after OpenSM's log) or VerifyLog (the log).
	Verify string
	// VerifyTimeout is how long a job whose ports' tables do not show its
	// change waits before it fails (with Verify = VerifyTables).
	VerifyTimeout time.Duration
	// SMPPort is the local HCA port the manager sends its SMPs from on real
	// hardware ("mlx5_0:1"); "" for the port OpenSM's guid names.
	SMPPort string
	// AuditInterval is how often the leader reads every host port's P_Key
	// table and compares it with the recorded state (internal/audit); 0: never.
	AuditInterval time.Duration
}

// The values of [opensm] verify.
const (
	VerifyTables = "tables"
	VerifyLog    = "log"
)

// The values of [opensm] driver.
const (
	// DriverProcess runs OpenSM as the manager's child process.
	DriverProcess = "process"
	// DriverManaged runs OpenSM in a container of its own, started through the
	// Docker Engine API, in the PID namespace of the manager's container.
	DriverManaged = "managed"
	// DriverDocker signals an OpenSM container that someone else runs.
	DriverDocker = "docker"
)

// Drivers are the values [opensm] driver takes.
var Drivers = []string{DriverProcess, DriverManaged, DriverDocker}

// KeyValue is one line of [opensm_conf].
type KeyValue struct{ Key, Value string }

// OwnedOpenSMOptions are the opensm.conf options the manager writes itself: it
// relies on their values (it follows the log it chose, flushed per line; OpenSM
// stays its child, in the foreground, without an unauthenticated console), so
// [opensm_conf] cannot set them. It is the list opensm.conf rendering enforces.
var OwnedOpenSMOptions = opensm.OwnedOptions

// OwnedQoSOptions are the opensm.conf options the manager owns besides on a
// fabric whose pkeys clients may set a pkey's QoS (FabricConfig.OwnsQoS);
// elsewhere [opensm_conf] may set them.
var OwnedQoSOptions = opensm.QoSOptions

// Load reads the file at path; see Parse.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a configuration file, applies the defaults and checks every value.
// name is how errors refer to the file. When the file has several problems the
// error lists them all, one per line.
func Parse(r io.Reader, name string) (*Config, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	file, errs := parseINI(string(text))

	c := Default()
	def := &c.Fabrics[0]
	def.OpenSM.LogFile = "" // derived from config_dir below, unless the file sets it
	for _, section := range file.sections {
		if _, _, ok := fabricSectionName(section.name); !ok && !isPKeysClientSection(section.name) {
			errs = append(errs, c.apply(section)...)
		}
	}
	if def.OpenSM.LogFile == "" {
		def.OpenSM.LogFile = defaultLogFile(def.OpenSM.ConfigDir)
	}
	fabrics, fabricErrs := parseFabrics(file)
	c.Fabrics = append(c.Fabrics, fabrics...)
	errs = append(errs, fabricErrs...)
	clients, clientErrs := parsePKeysClients(file)
	c.PKeysClients = clients
	errs = append(errs, clientErrs...)
	for _, f := range c.Fabrics {
		errs = append(errs, checkHardening(f, file)...)
	}
	if len(fabricErrs) == 0 {
		// What fabrics share is judged once each is whole: a fabric without
		// its config_dir would otherwise clash with the default fabric's.
		errs = append(errs, c.checkFabrics(file)...)
	}
	if c.HA.HA {
		if conn, err := parseConnection(c.Database.Connection); err == nil && conn.Engine == EngineSQLite {
			errs = append(errs, errors.New("[ha] ha = true needs a PostgreSQL or MariaDB [database] connection: "+
				"SQLite is one manager's file"))
		}
		for _, f := range c.Fabrics {
			if f.OpenSM.Driver != DriverDocker {
				continue
			}
			// Only the leader may run OpenSM, and that driver never stops it.
			errs = append(errs, fmt.Errorf("[ha] ha = true cannot be used with %s driver = docker: the manager "+
				"never starts or stops that container, so every manager's OpenSM would run all the time, not only "+
				"the leader's; use driver = managed (the manager runs OpenSM in a container it starts and stops with "+
				"its lease) or driver = process (OpenSM as the manager's child)", f.Section()))
		}
	}
	if c.API.Token == "" {
		errs = append(errs, errors.New("[api] token is required: the manager refuses to start without one"))
	}
	errs = append(errs, c.checkAPI()...)
	for _, f := range c.Fabrics {
		errs = append(errs, c.checkUFMPKeys(f)...)
	}
	if len(fabricErrs) == 0 && len(clientErrs) == 0 {
		errs = append(errs, c.checkPKeysClients()...)
		for _, f := range c.Fabrics {
			errs = append(errs, c.checkQoSOptions(f)...)
		}
	}

	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("%s: %w", name, e)
		}
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

// MinTokenLength is the shortest [api] token the manager serves with: the API
// changes who can reach which partition.
const MinTokenLength = 16

// CheckToken refuses a token (or [ufm_pkeys] password) too short to resist guessing. The manager checks
// it when it starts serving; the operator's commands, which never read the
// token, do not.
func (c *Config) CheckToken() error {
	if n := len(c.API.Token); n < MinTokenLength {
		return fmt.Errorf("[api] token is %d characters long; it must have at least %d. Make one with "+
			"\"openssl rand -hex 32\" (or \"head -c 32 /dev/urandom | base64\"), set it as [api] token here and "+
			"as [sdn] token in networking-mlnx's ml2_conf.ini", n, MinTokenLength)
	}
	lists := []struct {
		key    string
		values []string
	}{{"[api] previous_tokens", c.API.PreviousTokens}}
	for _, f := range c.Fabrics {
		if n := len(f.UFMPKeys.Password); f.UFMPKeys.Enabled() && n < MinPasswordLength {
			return fmt.Errorf("%s password is %d characters long; it must have at least %d. Make one with "+
				"\"openssl rand -hex 32\", set it here and as UFM_PASSWORD in %s",
				f.UFMPKeysSection(), n, MinPasswordLength, f.kubernetesSecret())
		}
		lists = append(lists, struct {
			key    string
			values []string
		}{f.UFMPKeysSection() + " previous_passwords", f.UFMPKeys.PreviousPasswords})
	}
	for _, l := range lists {
		for i, v := range l.values {
			if len(v) < MinTokenLength {
				return fmt.Errorf("%s: entry %d is %d characters long; it must have at least %d", l.key, i+1, len(v), MinTokenLength)
			}
		}
	}
	return c.checkPKeysClientSecrets()
}

// checkUFMPKeys checks the [ufm_pkeys] keys that go together, and the range
// against the partitions the configuration itself writes.
func (c *Config) checkUFMPKeys(f Fabric) []error {
	u, sec := f.UFMPKeys, f.UFMPKeysSection()
	var errs []error
	if !u.Enabled() {
		if !u.PKeyRange.Empty() {
			errs = append(errs, fmt.Errorf("%s pkey_range is set but username and password are not: "+
				"set both to serve the pkeys API, or remove pkey_range", sec))
		}
		if len(u.PreviousPasswords) > 0 {
			errs = append(errs, fmt.Errorf("%s previous_passwords is set but username and password are not: "+
				"previous passwords are accepted only beside a current one", sec))
		}
		return errs
	}
	if u.Username == "" || u.Password == "" {
		errs = append(errs, fmt.Errorf("%s username and password go together: set both (the pkeys API is served) or neither", sec))
	}
	switch r := u.PKeyRange; {
	case r.Empty():
		errs = append(errs, fmt.Errorf("%s pkey_range is required with username and password: "+
			"the pkeys Kubernetes may use, and no Neutron VLAN may, such as 0x1000-0x1fff", sec))
	case r.Contains(f.OpenSM.FlatPKey):
		errs = append(errs, fmt.Errorf("%s pkey_range %s holds %s flat_pkey %s, the flat networks' partition", sec, r, f.Section(), f.OpenSM.FlatPKey))
	case r.Contains(fabric.DefaultPKey):
		errs = append(errs, fmt.Errorf("%s pkey_range %s holds the default partition's pkey %s", sec, r, fabric.DefaultPKey))
	}
	if u.MaxGUIDsPerRequest > u.MaxMembersPerPKey || u.MaxMembersPerPKey > u.MaxMembers {
		errs = append(errs, fmt.Errorf("%s max_guids_per_request %d, max_members_per_pkey %d and max_members %d: "+
			"want each at most the next", sec, u.MaxGUIDsPerRequest, u.MaxMembersPerPKey, u.MaxMembers))
	}
	// On a listener of its own, the pkeys API shares no path with [api]'s.
	if u.Listen == "" && prefixesOverlap(c.API.Prefix, u.Prefix) {
		errs = append(errs, fmt.Errorf("%s prefix %s and [api] prefix %s overlap: give the pkeys API its own, such as /ufmRest",
			sec, u.Prefix, c.API.Prefix))
	}
	return errs
}

// MinPasswordLength is the shortest [ufm_pkeys] password the manager serves
// with, for the reason the token has one.
const MinPasswordLength = MinTokenLength

// checkAPI checks the [api] keys that go together.
func (c *Config) checkAPI() []error {
	var errs []error
	if (c.API.TLSCertFile == "") != (c.API.TLSKeyFile == "") {
		errs = append(errs, errors.New("[api] tls_cert_file and tls_key_file go together: set both (HTTPS) or neither (HTTP)"))
	}
	for _, l := range []struct{ key, addr string }{{"metrics_listen", c.API.MetricsListen}, {"debug_listen", c.API.DebugListen}} {
		if l.addr != "" && l.addr == c.API.Listen {
			errs = append(errs, fmt.Errorf("[api] %s = %s is the API's own listen address; give it another port", l.key, l.addr))
		}
	}
	if c.API.DebugListen != "" && c.API.DebugListen == c.API.MetricsListen {
		errs = append(errs, errors.New("[api] debug_listen and metrics_listen must differ: pprof is never served beside anything else"))
	}
	if c.API.DebugListen != "" && !Loopback(c.API.DebugListen) {
		errs = append(errs, fmt.Errorf("[api] debug_listen = %s is not a loopback address: pprof has no authentication "+
			"and shows the process's memory and command line; use 127.0.0.1:<port> or [::1]:<port> and reach it "+
			"through an SSH tunnel", c.API.DebugListen))
	}
	return errs
}

// Loopback says whether a host:port listens on loopback only: its host is
// localhost or a loopback IP address. An empty host, 0.0.0.0, [::] and host
// names listen elsewhere too.
func Loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// MetricsOpen says whether /metrics is served without a token: none is set
// and its listener (metrics_listen, or the API's) is on loopback, where only
// this host's users reach it. Off loopback a scrape needs metrics_token, or
// is refused: it reads the database.
func (a API) MetricsOpen() bool {
	addr := a.MetricsListen
	if addr == "" {
		addr = a.Listen
	}
	return a.MetricsToken == "" && Loopback(addr)
}

// Default returns the configuration a file that sets nothing would give. It has no
// token, which has no default, so Parse would refuse it.
func Default() Config {
	c := Config{Fabrics: []Fabric{{Name: DefaultFabric}}}
	for _, s := range sections {
		for _, f := range s.fields {
			if f.def == "" {
				continue
			}
			if err := f.set(&c, f.def); err != nil {
				panic(fmt.Sprintf("config: default of [%s] %s: %v", s.name, f.key, err))
			}
		}
	}
	c.Fabrics[0].OpenSM.LogFile = defaultLogFile(c.Fabrics[0].OpenSM.ConfigDir)
	return c
}

// defaultLogFile is log_file's default: OpenSM's log in its config_dir.
func defaultLogFile(configDir string) string { return filepath.Join(configDir, "opensm.log") }

// apply stores the entries of one section of the file, and returns their errors.
func (c *Config) apply(s iniSection) []error {
	if s.name == opensmConfSection {
		return c.applyOpenSMConf(s)
	}
	i := slices.IndexFunc(sections, func(known section) bool { return known.name == s.name })
	if i < 0 {
		return []error{fmt.Errorf("unknown section [%s] (line %d); known sections: %s", s.name, s.line, sectionNames())}
	}
	return c.applyFields(s, sections[i])
}

// applyFields stores the entries of s, read with the fields of known, and
// returns their errors.
func (c *Config) applyFields(s iniSection, known section) []error {
	var errs []error
	for _, e := range s.entries {
		j := slices.IndexFunc(known.fields, func(f field) bool { return f.key == e.key })
		if j < 0 {
			errs = append(errs, fmt.Errorf("unknown key %q in [%s] (line %d); known keys: %s",
				e.key, s.name, e.line, known.keyNames()))
			continue
		}
		f := known.fields[j]
		if e.value == "" {
			continue // an empty value leaves the default, as if the line were not there
		}
		if err := f.set(c, e.value); err != nil {
			errs = append(errs, fmt.Errorf("[%s] %s = %s (line %d): %w", s.name, f.key, f.show(e.value), e.line, err))
		}
	}
	return errs
}
