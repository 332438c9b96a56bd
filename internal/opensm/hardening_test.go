package opensm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

// fixedKeys are made-up keys for golden files; real keys come from GenerateKeys.
var fixedKeys = Keys{MKey: 0x0123456789abcdef, SMKey: 0x1edcba9876543210, SAKey: 0x2aaaaaaaaaaaaaa5}

func hardened(f fabric.Flavour) ConfOptions {
	o := confPaths
	o.Hardening = fullHardening()
	o.Flavour = f
	o.Keys = fixedKeys
	o.Passthrough = []KeyValue{{"guid", "0x0002c90300a00001"}}
	return o
}

func TestRenderConfHardenedGolden(t *testing.T) {
	for name, f := range map[string]fabric.Flavour{"opensm-hardened-upstream.conf.golden": fabric.Upstream, "opensm-hardened-nvidia.conf.golden": fabric.NVIDIA} {
		got, err := RenderConf(hardened(f))
		if err != nil {
			t.Fatal(err)
		}
		golden.Compare(t, filepath.Join("testdata", name), got)
	}
}

func TestRenderConfHardeningGroups(t *testing.T) {
	tests := []struct {
		groups  []Group
		flavour fabric.Flavour
		want    map[string]string // options that must be written, once, with this value
		absent  []string          // options that must not be written
	}{
		{[]Group{GroupMKey}, fabric.Upstream, map[string]string{
			"m_key": "0x0123456789abcdef", "m_key_protection_level": "2", "m_key_lease_period": "60", "m_key_lookup": "TRUE",
		}, []string{"m_key_per_port", "sm_key", "sa_key", "part_enforce"}},
		{[]Group{GroupMKey}, fabric.NVIDIA, map[string]string{"m_key": "0x0123456789abcdef", "m_key_per_port": "FALSE"}, nil},
		{[]Group{GroupKeys}, fabric.Upstream, map[string]string{"sm_key": "0x1edcba9876543210", "sa_key": "0x2aaaaaaaaaaaaaa5"},
			[]string{"m_key", "m_key_protection_level"}},
		{[]Group{GroupEnforcement}, fabric.Upstream, map[string]string{
			"part_enforce": "both", "no_partition_enforcement": "FALSE", "allow_both_pkeys": "FALSE", "keep_pkey_indexes": "TRUE",
		}, []string{"m_key", "sm_key"}},
		{[]Group{GroupSATrust}, fabric.NVIDIA, map[string]string{"sa_enhanced_trust_model": "TRUE"}, nil},
		{[]Group{GroupSATrust}, fabric.Upstream, nil, []string{"sa_enhanced_trust_model"}},
		{[]Group{GroupDefaultPartition}, fabric.NVIDIA, nil, []string{"m_key", "sm_key", "part_enforce", "sa_enhanced_trust_model"}},
	}
	for _, tt := range tests {
		t.Run(joinGroups(tt.groups)+" "+tt.flavour.String(), func(t *testing.T) {
			o := hardened(tt.flavour)
			o.Hardening.Groups = tt.groups
			got, err := RenderConf(o)
			if err != nil {
				t.Fatal(err)
			}
			opts := options(t, got)
			for key, value := range tt.want {
				if !slices.Equal(opts[key], []string{value}) {
					t.Errorf("%s = %q, want exactly [%q]", key, opts[key], value)
				}
			}
			for _, key := range tt.absent {
				if _, ok := opts[key]; ok {
					t.Errorf("%s written: %q", key, opts[key])
				}
			}
		})
	}
}

func TestRenderConfHardeningRejects(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(o *ConfOptions)
		wantErr string
	}{
		{"group option in passthrough", func(o *ConfOptions) { o.Passthrough = []KeyValue{{"sa_key", "0x1"}} },
			"option sa_key is set by the hardening group keys"},
		{"group option in another case", func(o *ConfOptions) { o.Passthrough = []KeyValue{{"Part_Enforce", "off"}} },
			"hardening group enforcement"},
		{"no keys", func(o *ConfOptions) { o.Keys = Keys{} }, "SA_Key is 0, 1"},
		{"default SM_Key", func(o *ConfOptions) { o.Keys.SMKey = 1 }, "SM_Key is 0, 1"},
		{"protection level 0", func(o *ConfOptions) { o.Hardening.MKeyProtectionLevel = 0 }, "m_key_protection_level 0"},
		{"lease too long", func(o *ConfOptions) { o.Hardening.MKeyLeasePeriod = 70000 }, "m_key_lease_period 70000"},
		{"unknown group", func(o *ConfOptions) { o.Hardening.Groups = []Group{"m_keys"} }, `unknown hardening group "m_keys"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := hardened(fabric.Upstream)
			tt.edit(&o)
			got, err := RenderConf(o)
			if err == nil {
				t.Fatalf("no error; rendered:\n%s", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
	// With its group off, an option is the operator's.
	o := hardened(fabric.Upstream)
	o.Hardening.Groups = []Group{GroupMKey}
	o.Passthrough = []KeyValue{{"sa_key", "0x2aaaaaaaaaaaaaa6"}}
	got, err := RenderConf(o)
	if err != nil {
		t.Fatal(err)
	}
	if v := options(t, got)["sa_key"]; !slices.Equal(v, []string{"0x2aaaaaaaaaaaaaa6"}) {
		t.Errorf("sa_key = %q, want the operator's", v)
	}
}

func TestParseGroups(t *testing.T) {
	tests := []struct {
		line    string
		want    []Group
		wantErr string
	}{
		{"all", AllGroups, ""},
		{" all ", AllGroups, ""},
		{"none", []Group{}, ""},
		{"m_key, enforcement", []Group{GroupMKey, GroupEnforcement}, ""},
		{"sa_trust,keys,m_key", []Group{GroupMKey, GroupKeys, GroupSATrust}, ""},
		{"m_key, enforcment", nil, `unknown hardening group "enforcment"`},
		{"", nil, "empty group name"},
		{"keys,", nil, "empty group name"},
		{"keys, keys", nil, "given twice"},
		{"all, keys", nil, `"all" stands alone`},
	}
	for _, tt := range tests {
		got, err := ParseGroups(tt.line)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseGroups(%q): error %v, want %q", tt.line, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("ParseGroups(%q) = %q, %v; want %q", tt.line, got, err, tt.want)
		}
	}
}

func TestWriteConfMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.conf")
	// A file left readable by others, as an operator might have made it.
	if err := os.WriteFile(path, []byte("sa_key 0x1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteConf(path, hardened(fabric.Upstream)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("opensm.conf has mode %v, want 0600: it holds the keys", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "sa_key "+FormatKey(fixedKeys.SAKey)) {
		t.Errorf("opensm.conf lacks the SA key:\n%s", data)
	}
	o := hardened(fabric.Upstream)
	o.Keys = Keys{}
	if err := WriteConf(path, o); err == nil {
		t.Error("WriteConf wrote a file with unusable keys")
	}
	if again, _ := os.ReadFile(path); string(again) != string(data) {
		t.Error("a failed WriteConf changed the file")
	}
}

// TestOpenSMReadsHardenedConf asks the installed OpenSM (upstream 3.3.23) to
// read the rendered file (opensm -c writes every option with the value it
// took): every option written for upstream is known and taken with our value;
// the NVIDIA-only ones are exactly what it does not know.
func TestOpenSMReadsHardenedConf(t *testing.T) {
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	for _, f := range []fabric.Flavour{fabric.Upstream, fabric.NVIDIA} {
		t.Run(f.String(), func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "opensm.conf"), filepath.Join(dir, "effective.conf")
			o := hardened(f)
			if err := WriteConf(in, o); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			stdout, err := exec.CommandContext(ctx, opensm, "-F", in, "-c", out).CombinedOutput()
			if err != nil {
				t.Fatalf("opensm -c: %v\n%s", err, stdout)
			}
			var unknown []string
			for line := range strings.Lines(string(stdout)) {
				if name, ok := strings.CutPrefix(strings.TrimSpace(line), "Unrecognized token: "); ok {
					unknown = append(unknown, strings.Trim(name, `"`))
				}
			}
			wantUnknown := []string{}
			if f == fabric.NVIDIA {
				wantUnknown = []string{"m_key_per_port", "sa_enhanced_trust_model"}
			}
			slices.Sort(unknown)
			if !slices.Equal(unknown, wantUnknown) {
				t.Errorf("OpenSM does not know %q, want %q", unknown, wantUnknown)
			}
			effective, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			took := options(t, effective)
			opts, _ := o.Hardening.options(fabric.Upstream, o.Keys)
			for _, kv := range opts {
				if !slices.Equal(took[kv.Key], []string{kv.Value}) {
					t.Errorf("OpenSM took %s = %q, want [%q]", kv.Key, took[kv.Key], kv.Value)
				}
			}
		})
	}
}

// TestHardenedOpenSMOnSimulatedFabric runs the real OpenSM with a hardened
// opensm.conf and generated keys on the simulated fabric. ibsim does not
// emulate M_Keys, so for M_Key protection the test can only show that OpenSM
// reaches SUBNET UP with it (TestOpenSMReadsHardenedConf shows it takes the
// key). The SA key is enforced by OpenSM itself, so it can be tested: a
// P_KeyTableRecord query, which needs a trusted request, is answered with
// --smkey <sa_key> and not with OpenSM's well-known default key 1, which any
// host would try first.
func TestHardenedOpenSMOnSimulatedFabric(t *testing.T) {
	fab := fabricsim.StartT(t, fabricsim.Options{Hosts: 2})
	cfg := writeOpenSMFiles(t, fab, defaultPartition)
	ctx := t.Context()
	flavour, err := DetectFlavour(ctx, cfg.Command)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	o := ConfOptions{
		PartitionsFile:       filepath.Join(fab.Dir, "partitions.conf"),
		LogFile:              cfg.LogFile,
		PerModuleLoggingFile: filepath.Join(fab.Dir, "per-module-logging.conf"),
		Hardening:            fullHardening(),
		Flavour:              flavour,
		Keys:                 keys,
		Passthrough:          []KeyValue{{"guid", fab.SMGUID.String()}},
	}
	if err := WriteConf(cfg.ConfFile, o); err != nil {
		t.Fatal(err)
	}
	p := NewProcess(cfg)
	startProcess(t, p)
	res, err := waitSweep(ctx, cfg.LogFile, Position{}, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Applied {
		t.Fatalf("first sweep with the hardened opensm.conf: %q (%s)", res.Outcome, res.Detail)
	}

	lid, err := fab.LID(fab.Host("H1").PortGUID)
	if err != nil {
		t.Fatal(err)
	}
	pktr := func(smkey ...string) ([]byte, error) {
		args := append(smkey, "-t", "500", "PKTR", strconv.Itoa(lid))
		return fab.Run(ctx, "saquery", args...)
	}
	// The SA ignores requests during a new master's first sweep: retry a little.
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		if out, err = pktr("--smkey", FormatKey(keys.SAKey)); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("saquery with the SA key: %v", err)
	}
	if !strings.Contains(string(out), "PKeyTableRecord") || !strings.Contains(string(out), "0x7fff") {
		t.Errorf("saquery with the SA key did not list H1's table:\n%s", out)
	}
	if out, err := pktr("--smkey", "1"); err == nil {
		t.Errorf("saquery with the default SA key 1 was answered:\n%s", out)
	}
	// Untrusted (no key): refused too, though an unhardened OpenSM refuses it as well.
	var exitErr *exec.ExitError
	if out, err := pktr(); err == nil || !errors.As(err, &exitErr) {
		t.Errorf("saquery without a key: %v\n%s", err, out)
	}
}

// fullHardening is [opensm] hardening's default: every group, with the
// default M_Key options.
func fullHardening() Hardening {
	return Hardening{Groups: slices.Clone(AllGroups), MKeyProtectionLevel: DefaultMKeyProtectionLevel,
		MKeyLeasePeriod: DefaultMKeyLeasePeriod}
}
