package opensm

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// KeyValue is one option of opensm.conf: OpenSM reads "key value" per line.
type KeyValue struct{ Key, Value string }

// QoSPolicyFileName is the QoS policy file's name in the manager's OpenSM
// directory, beside partitions.conf.
const QoSPolicyFileName = "qos-policy.conf"

// ConfOptions is what RenderConf needs to write opensm.conf.
type ConfOptions struct {
	PartitionsFile       string // partition_config_file: the file the manager rewrites
	LogFile              string // log_file: the file a Tail and the Supervisor read
	PerModuleLoggingFile string // per_module_logging_file: see PerModuleLoggingConf
	// QoSPolicyFile is qos_policy_file, the QoS policy the manager rewrites
	// beside the partitions file (the Kubernetes pkeys' SL, MTU and rate
	// limits) when a pkeys client may set a QoS: then the manager owns qos
	// and qos_policy_file (QoSOptions), and qos is QoS. Empty writes
	// neither, and leaves them to Passthrough.
	QoSPolicyFile string
	// QoS is qos TRUE (some pkey's QoS is set) or FALSE, with QoSPolicyFile.
	QoS bool
	// DumpFilesDir is dump_files_dir, where OpenSM rewrites opensm-subnet.lst
	// (read by package topology) at every SUBNET UP; OpenSM writes that file
	// whatever its log level. Empty leaves OpenSM's default ($OSM_TMP_DIR, or
	// /var/log).
	DumpFilesDir string

	// Hardening chooses the hardening groups whose options are written; the
	// zero value writes none. Flavour is the OpenSM that reads the file: only
	// the options it knows are written. Keys are needed by the groups m_key
	// and keys.
	Hardening Hardening
	Flavour   fabric.Flavour
	Keys      Keys

	// Passthrough holds the operator's [opensm_conf] options, written in this
	// order after the options the manager owns. Keys must not be in OwnedOptions,
	// nor belong to a hardening group that is on (see OptionGroup).
	Passthrough []KeyValue
}

// OwnedOptions are the opensm.conf options the manager always sets itself. An
// operator who could change them would break what this package relies on: the
// log lines that prove a sweep (log_file, force_log_flush, per-module logging),
// the file that gets applied (partition_config_file), and a foreground OpenSM
// with no unauthenticated console (daemon, console). accum_log_file FALSE would
// truncate the log at every start, under the follower's feet. dump_files_dir is
// where the switches the gates compare with the confirmed ones are read.
// exit_on_fatal FALSE keeps OpenSM master through the faults a host can
// provoke (a duplicated GUID): exiting would leave the subnet without its SM
// until the supervisor restarts it into the same fault, and the manager names
// the fault in a gate instead (docs/opensm-hardening.md has the figures).
var OwnedOptions = []string{
	"partition_config_file",
	"log_file",
	"force_log_flush",
	"per_module_logging_file",
	"daemon",
	"console",
	"accum_log_file",
	"dump_files_dir",
	"exit_on_fatal",
}

// QoSOptions are the options the manager owns besides OwnedOptions when a
// pkeys client may set a pkey's QoS (ConfOptions.QoSPolicyFile): they carry
// the pkeys' QoS, which another policy would change, and qos is turned on
// only while some pkey's QoS is set. Without a pkeys client they are the
// operator's.
var QoSOptions = []string{"qos", "qos_policy_file"}

// unparsableOptions would change the log lines this package reads: log_prefix
// puts a prefix before every message, so "SUBNET UP" would never be seen.
var unparsableOptions = []string{"log_prefix"}

// defaultLogFlags is ERROR and INFO: it includes "SUBNET UP" and every ERR line.
// The operator may change it ([opensm_conf] log_flags); the sweep markers come
// from the per-module logging file whatever it is.
const defaultLogFlags = "0x03"

// checkLogFlags refuses a log_flags with DEBUG (0x08) or FRAMES (0x20). At
// DEBUG OpenSM logs, unfiltered, strings that hosts send it (the names of the
// service records they register through the SA, the node descriptions in
// their queries), where a newline starts a line of the host's making in the
// log: a forged "SUBNET UP" would complete jobs before anything is applied.
// At FRAMES it dumps every MAD it sends and receives, the M_Key of each
// PortInfo included: the key that protects every port would sit in a log
// that log readers and forwarders see. The value is read as OpenSM reads it
// (strtoul, base 0); one it would not read as a number is refused too.
func checkLogFlags(value string) error {
	v := strings.TrimSpace(value)
	base := 10
	switch {
	case strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0X"):
		v, base = v[2:], 16
	case len(v) > 1 && v[0] == '0':
		v, base = v[1:], 8
	}
	flags, err := strconv.ParseUint(v, base, 8)
	if err != nil {
		return errors.New("want a number from 0 to 0xff, as OpenSM reads it")
	}
	if flags&uint64(LevelDebug) != 0 {
		return errors.New("DEBUG (0x08) logs strings the fabric's hosts send unfiltered, which could forge the lines the manager reads; leave it out")
	}
	if flags&uint64(LevelFrames) != 0 {
		return errors.New("FRAMES (0x20) dumps every MAD into the log, the M_Key of every port included; leave it out")
	}
	return nil
}

// OpenSM splits an option line at the first blank; option names are C
// identifiers in lower case.
var optionKey = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// RenderConf returns the contents of opensm.conf. It fails when a passthrough
// option tries to set an owned option (or log_prefix) or an option of a
// hardening group that is on, repeats a key, or when any key or value could
// break the file's line structure (a value with a newline would smuggle in
// another option), and when the hardening groups need keys that Keys.Check
// refuses. The file holds secret keys: WriteConf writes it with mode 0600.
func RenderConf(o ConfOptions) ([]byte, error) {
	if err := o.Hardening.check(o.Keys); err != nil {
		return nil, fmt.Errorf("opensm.conf: hardening: %w", err)
	}
	owned := []KeyValue{
		{"partition_config_file", o.PartitionsFile},
		{"log_file", o.LogFile},
		{"per_module_logging_file", o.PerModuleLoggingFile},
		{"force_log_flush", "TRUE"}, // OpenSM takes only "TRUE" as true
		{"accum_log_file", "TRUE"},
		{"daemon", "FALSE"},
		{"console", "off"},
		{"exit_on_fatal", "FALSE"},
	}
	for _, kv := range owned[:3] {
		if kv.Value == "" {
			return nil, fmt.Errorf("opensm.conf: %s: no path given", kv.Key)
		}
	}
	operatorSetsLogFlags, err := checkPassthrough(o)
	if err != nil {
		return nil, err
	}
	if o.DumpFilesDir != "" {
		owned = append(owned, KeyValue{"dump_files_dir", o.DumpFilesDir})
	}
	if o.QoSPolicyFile != "" {
		qos := "FALSE"
		if o.QoS {
			qos = "TRUE"
		}
		owned = append(owned, KeyValue{"qos", qos}, KeyValue{"qos_policy_file", o.QoSPolicyFile})
	}
	if !operatorSetsLogFlags {
		owned = append(owned, KeyValue{"log_flags", defaultLogFlags})
	}

	var b bytes.Buffer
	b.WriteString("# Written by alternative-fabric-manager; edits are lost when it rewrites this file.\n")
	b.WriteString("# Options the manager owns:\n")
	if err := writeOptions(&b, owned); err != nil {
		return nil, err
	}
	hardening, skipped := o.Hardening.options(o.Flavour, o.Keys)
	if len(hardening) > 0 || len(skipped) > 0 {
		fmt.Fprintf(&b, "\n# Hardening groups on: %s (see docs/opensm-hardening.md):\n", joinGroups(o.Hardening.Groups))
		for _, g := range skipped {
			fmt.Fprintf(&b, "# %s: nothing to write for %s OpenSM\n", g, o.Flavour)
		}
		if err := writeOptions(&b, hardening); err != nil {
			return nil, err
		}
	}
	if len(o.Passthrough) > 0 {
		b.WriteString("\n# Options from the [opensm_conf] section of the manager's configuration:\n")
		if err := writeOptions(&b, o.Passthrough); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// checkPassthrough refuses an [opensm_conf] option of o the manager sets or
// cannot read the log of; operatorSetsLogFlags says whether log_flags is
// among them.
func checkPassthrough(o ConfOptions) (operatorSetsLogFlags bool, err error) {
	seen := map[string]bool{}
	for _, kv := range o.Passthrough {
		if !optionKey.MatchString(kv.Key) {
			return false, fmt.Errorf("opensm.conf: option name %q: want letters, digits and underscores", kv.Key)
		}
		if slices.Contains(OwnedOptions, kv.Key) {
			return false, fmt.Errorf("opensm.conf: option %s is set by the manager and cannot be overridden", kv.Key)
		}
		if o.QoSPolicyFile != "" && slices.Contains(QoSOptions, kv.Key) {
			return false, fmt.Errorf("opensm.conf: option %s is set by the manager while a pkeys client may set a pkey's QoS, "+
				"and cannot be overridden", kv.Key)
		}
		if slices.Contains(unparsableOptions, kv.Key) {
			return false, fmt.Errorf("opensm.conf: option %s is not supported: it changes the log lines the manager reads", kv.Key)
		}
		if g := OptionGroup(kv.Key); g != "" && o.Hardening.Has(g) {
			return false, fmt.Errorf("opensm.conf: option %s is set by the hardening group %s; remove it, or take %s out of [opensm] hardening",
				kv.Key, g, g)
		}
		if seen[kv.Key] {
			return false, fmt.Errorf("opensm.conf: option %s given twice", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == "log_flags" {
			if err := checkLogFlags(kv.Value); err != nil {
				return false, fmt.Errorf("opensm.conf: log_flags %q: %w", kv.Value, err)
			}
			operatorSetsLogFlags = true
		}
	}
	return operatorSetsLogFlags, nil
}

func joinGroups(groups []Group) string {
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = string(g)
	}
	return strings.Join(names, ", ")
}

// WriteConf renders opensm.conf (see RenderConf) and writes it to path,
// atomically and with mode 0600: it holds the fabric's secret keys.
func WriteConf(path string, o ConfOptions) error {
	conf, err := RenderConf(o)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, conf, 0o600)
}

func writeOptions(b *bytes.Buffer, kvs []KeyValue) error {
	for _, kv := range kvs {
		if err := checkValue(kv); err != nil {
			return err
		}
		fmt.Fprintf(b, "%s %s\n", kv.Key, kv.Value)
	}
	return nil
}

// MaxOptionLine is the longest option line, "key value", that OpenSM reads
// whole: it reads opensm.conf with fgets into a 1,023-byte buffer, and the
// rest of a longer line becomes a line of its own, read as another option
// (a value ending in "... no_partition_enforcement TRUE" at the right place
// would turn enforcement off whatever the hardening groups say).
const MaxOptionLine = 1022

// CheckOption refuses an option line OpenSM would not read as the one option
// it is: a line break or another control character in the value, a '#'
// (OpenSM reads the rest of the line as a comment: "guid 0x... # a port"
// would be read as the GUID alone while the manager, and the operator,
// take the whole value), or a line longer than MaxOptionLine. The error
// names the option, never the value (it may be a key).
func CheckOption(key, value string) error {
	if i := strings.IndexByte(value, '#'); i >= 0 {
		return fmt.Errorf("option %s: the value holds '#' at offset %d, where OpenSM's comment starts: afm.conf takes "+
			"comments only on lines of their own, so move it to one", key, i)
	}
	if i := strings.IndexFunc(value, func(r rune) bool { return r < ' ' || r == 0x7f }); i >= 0 {
		what := "a control character"
		if value[i] == '\n' || value[i] == '\r' {
			what = "a line break"
		}
		return fmt.Errorf("option %s: the value holds %s (byte 0x%02x at offset %d), which could end the option's line "+
			"and start another", key, what, value[i], i)
	}
	if n := len(key) + 1 + len(value); n > MaxOptionLine {
		return fmt.Errorf("option %s: its line would be %d bytes; OpenSM reads at most %d bytes of a line and would "+
			"read the rest as another option", key, n, MaxOptionLine)
	}
	return nil
}

func checkValue(kv KeyValue) error {
	if err := CheckOption(kv.Key, kv.Value); err != nil {
		return fmt.Errorf("opensm.conf: %w", err)
	}
	if strings.TrimSpace(kv.Value) == "" {
		return fmt.Errorf("opensm.conf: option %s: empty value", kv.Key)
	}
	return nil
}

// loggedModules are the OpenSM source files whose VERBOSE lines a SweepWatch needs:
// the sweep boxes (osm_state_mgr.c), state changes (osm_sm_state_mgr.c), the
// "not accessible" and "Cannot open config file" lines of the partitions file
// (osm_prtn.c, osm_prtn_config.c) and the pkey manager's decisions
// (osm_pkey_mgr.c). Full VERBOSE would add a line per port on every sweep.
var loggedModules = []string{
	"osm_state_mgr.c",
	"osm_sm_state_mgr.c",
	"osm_prtn.c",
	"osm_prtn_config.c",
	"osm_pkey_mgr.c",
}

// PerModuleLoggingConf returns the per-module logging file: ERROR, INFO and
// VERBOSE (0x07) for the modules whose lines prove a sweep. OpenSM ORs these
// levels with log_flags and re-reads the file at every heavy sweep. An unknown
// module name would make OpenSM stop reading the file, so the list is fixed.
func PerModuleLoggingConf() []byte {
	var b bytes.Buffer
	b.WriteString("# per-module logging written by alternative-fabric-manager: \"<source file> <level mask>\"\n")
	for _, m := range loggedModules {
		fmt.Fprintf(&b, "%s 0x07\n", m)
	}
	return b.Bytes()
}
