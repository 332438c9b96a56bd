package opensm

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

var confPaths = ConfOptions{
	PartitionsFile:       "/var/lib/alternative-fabric-manager/partitions.conf",
	LogFile:              "/var/log/alternative-fabric-manager/opensm.log",
	PerModuleLoggingFile: "/var/lib/alternative-fabric-manager/per-module-logging.conf",
	QoSPolicyFile:        "/var/lib/alternative-fabric-manager/qos-policy.conf",
}

func TestRenderConfGolden(t *testing.T) {
	o := confPaths
	o.Passthrough = []KeyValue{
		{"guid", "0x0002c90300a00001"},
		{"sm_priority", "14"},
		{"sweep_interval", "10"},
		{"root_guid_file", "/etc/opensm/root guids"}, // values may contain blanks
	}
	got, err := RenderConf(o)
	if err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, filepath.Join("testdata", "opensm.conf.golden"), got)
}

// options parses a rendered file the way OpenSM reads it: "key value" per line.
func options(t *testing.T, conf []byte) map[string][]string {
	t.Helper()
	opts := map[string][]string{}
	for _, line := range strings.Split(string(conf), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("line %q has no value", line)
		}
		opts[key] = append(opts[key], value)
	}
	return opts
}

func TestRenderConfOwnedValues(t *testing.T) {
	o := confPaths
	o.DumpFilesDir = "/var/lib/afm/opensm"
	got, err := RenderConf(o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"partition_config_file":   confPaths.PartitionsFile,
		"log_file":                confPaths.LogFile,
		"per_module_logging_file": confPaths.PerModuleLoggingFile,
		"force_log_flush":         "TRUE",
		"accum_log_file":          "TRUE",
		"daemon":                  "FALSE",
		"console":                 "off",
		"log_flags":               "0x03",
		"dump_files_dir":          o.DumpFilesDir,
		// A host presenting a duplicated GUID must not stop the SM.
		"exit_on_fatal": "FALSE",
	}
	opts := options(t, got)
	for key, value := range want {
		if !slices.Equal(opts[key], []string{value}) {
			t.Errorf("%s = %q, want exactly [%q]", key, opts[key], value)
		}
	}
	for _, key := range OwnedOptions {
		if _, ok := want[key]; !ok {
			t.Errorf("owned option %s has no expected value in this test", key)
		}
	}
}

// TestRenderConfQoS: qos and qos_policy_file are the manager's only with a
// QoS policy file (a pkeys client may set a pkey's QoS), and qos is TRUE only
// while some pkey's QoS is set; without one they are the operator's.
func TestRenderConfQoS(t *testing.T) {
	operator := []KeyValue{{"qos", "TRUE"}, {"qos_policy_file", "/etc/opensm/qos-policy.conf"}}
	tests := []struct {
		name    string
		policy  string
		qos     bool
		pass    []KeyValue
		want    map[string][]string
		wantErr string
	}{
		{"no pkeys client: the operator's", "", false, operator,
			map[string][]string{"qos": {"TRUE"}, "qos_policy_file": {"/etc/opensm/qos-policy.conf"}}, ""},
		{"no pkeys client, no operator: none", "", false, nil,
			map[string][]string{"qos": nil, "qos_policy_file": nil}, ""},
		{"no pkey's QoS set: off", confPaths.QoSPolicyFile, false, nil,
			map[string][]string{"qos": {"FALSE"}, "qos_policy_file": {confPaths.QoSPolicyFile}}, ""},
		{"a pkey's QoS set: on", confPaths.QoSPolicyFile, true, nil,
			map[string][]string{"qos": {"TRUE"}, "qos_policy_file": {confPaths.QoSPolicyFile}}, ""},
		{"a pkeys client and the operator's qos", confPaths.QoSPolicyFile, false, operator[:1], nil,
			"option qos is set by the manager while a pkeys client may set a pkey's QoS"},
		{"a pkeys client and the operator's policy", confPaths.QoSPolicyFile, false, operator[1:], nil,
			"option qos_policy_file is set by the manager while a pkeys client may set a pkey's QoS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := confPaths
			o.QoSPolicyFile, o.QoS, o.Passthrough = tt.policy, tt.qos, tt.pass
			got, err := RenderConf(o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RenderConf = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			opts := options(t, got)
			for key, want := range tt.want {
				if !slices.Equal(opts[key], want) {
					t.Errorf("%s = %q, want %q", key, opts[key], want)
				}
			}
		})
	}
}

func TestRenderConfOperatorLogFlags(t *testing.T) {
	for _, v := range []string{"0x83", "0x07", "0xD7", "7", "0"} {
		o := confPaths
		o.Passthrough = []KeyValue{{"log_flags", v}}
		got, err := RenderConf(o)
		if err != nil {
			t.Fatal(err)
		}
		if flags := options(t, got)["log_flags"]; !slices.Equal(flags, []string{v}) {
			t.Errorf("log_flags = %q, want only the operator's [%s]", flags, v)
		}
	}
}

func TestRenderConfRejects(t *testing.T) {
	withPassthrough := func(kvs ...KeyValue) ConfOptions {
		o := confPaths
		o.Passthrough = kvs
		return o
	}
	tests := []struct {
		name    string
		opts    ConfOptions
		wantErr string
	}{
		{"owned option", withPassthrough(KeyValue{"log_file", "/tmp/other.log"}), "cannot be overridden"},
		{"owned option daemon", withPassthrough(KeyValue{"daemon", "TRUE"}), "cannot be overridden"},
		{"owned option accum_log_file", withPassthrough(KeyValue{"accum_log_file", "FALSE"}), "cannot be overridden"},
		{"newline smuggles an option", withPassthrough(KeyValue{"sm_priority", "1\nconsole loopback"}), "line break"},
		{"carriage return", withPassthrough(KeyValue{"sm_priority", "1\r"}), "line break"},
		{"NUL", withPassthrough(KeyValue{"sm_priority", "1\x00"}), "control character"},
		{"vertical tab", withPassthrough(KeyValue{"node_name_map_name", "/x\vno_partition_enforcement TRUE"}), "control character"},
		{"line past OpenSM's buffer", withPassthrough(KeyValue{"node_name_map_name",
			"/" + strings.Repeat("x", MaxOptionLine-len("node_name_map_name /")) + "no_partition_enforcement TRUE"}),
			"OpenSM reads at most 1022 bytes of a line"},
		{"owned path past OpenSM's buffer", ConfOptions{PartitionsFile: "/" + strings.Repeat("p", 1100), LogFile: "/l",
			PerModuleLoggingFile: "/p"}, "would be 1123 bytes"},
		{"empty value", withPassthrough(KeyValue{"sm_priority", " "}), "empty value"},
		{"blank in key", withPassthrough(KeyValue{"sm priority", "1"}), "option name"},
		{"empty key", withPassthrough(KeyValue{"", "1"}), "option name"},
		{"log_prefix hides the markers", withPassthrough(KeyValue{"log_prefix", "fabric1"}), "log lines"},
		{"log_flags with DEBUG", withPassthrough(KeyValue{"log_flags", "0x0f"}), "DEBUG"},
		{"log_flags with DEBUG, in decimal", withPassthrough(KeyValue{"log_flags", "255"}), "DEBUG"},
		{"log_flags with DEBUG, in octal", withPassthrough(KeyValue{"log_flags", "010"}), "DEBUG"},
		{"log_flags with FRAMES", withPassthrough(KeyValue{"log_flags", "0x23"}), "FRAMES"},
		{"log_flags with FRAMES, in decimal", withPassthrough(KeyValue{"log_flags", "39"}), "M_Key"},
		{"log_flags not a number", withPassthrough(KeyValue{"log_flags", "verbose"}), "number"},
		{"duplicate key", withPassthrough(KeyValue{"sm_priority", "1"}, KeyValue{"sm_priority", "2"}), "twice"},
		{"no partitions file", ConfOptions{LogFile: "/l", PerModuleLoggingFile: "/p"}, "partition_config_file"},
		{"no log file", ConfOptions{PartitionsFile: "/x", PerModuleLoggingFile: "/p"}, "log_file"},
		{"newline in owned path", ConfOptions{PartitionsFile: "/x\nconsole loopback", LogFile: "/l", PerModuleLoggingFile: "/p"}, "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderConf(tt.opts)
			if err == nil {
				t.Fatalf("no error; rendered:\n%s", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
}

// TestOptionLineAtOpenSMsLimit: a line of exactly MaxOptionLine bytes is
// written, one byte more is refused.
func TestOptionLineAtOpenSMsLimit(t *testing.T) {
	o := confPaths
	value := strings.Repeat("x", MaxOptionLine-len("node_name_map_name "))
	o.Passthrough = []KeyValue{{"node_name_map_name", value}}
	if _, err := RenderConf(o); err != nil {
		t.Errorf("a %d-byte line: %v", MaxOptionLine, err)
	}
	o.Passthrough = []KeyValue{{"node_name_map_name", value + "x"}}
	if _, err := RenderConf(o); err == nil {
		t.Errorf("a %d-byte line was written", MaxOptionLine+1)
	}
}

func TestPerModuleLoggingConf(t *testing.T) {
	golden.Compare(t, filepath.Join("testdata", "per-module-logging.conf.golden"), PerModuleLoggingConf())
}
