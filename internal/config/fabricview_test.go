package config

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestEveryFabricAlike: each fabric of Config.Fabrics, the default first, is
// answered for by the same methods: its FabricConfig (its OpenSM,
// opensm.conf options, pkeys API and physical networks beside the file's
// process-wide settings), its pkeys API settings in the
// file's Config, its cache directory, its name in messages and errors. The
// default fabric's answers are those of the file of one fabric.
func TestEveryFabricAlike(t *testing.T) {
	c := parseFile(t, filepath.Join("testdata", "fabrics", "valid", "compute-storage.conf"))
	for i, tt := range []struct {
		name, configDir, cacheDir, label, wrapped string
		physnets                                  []string
		pkeys                                     fabric.PKeyRange
		guid                                      fabric.GUID
	}{
		{"default", "/var/lib/alternative-fabric-manager/opensm", "", "applier", "boom",
			[]string{"ibnet", "ibnet-2"}, fabric.PKeyRange{First: 0x1000, Last: 0x1fff}, 0x0002c90300a00001},
		{"storage", "/var/lib/alternative-fabric-manager/opensm-storage",
			"/var/lib/alternative-fabric-manager/opensm-storage/cache", "applier of fabric storage", "[fabric:storage]: boom",
			[]string{"storage"}, fabric.PKeyRange{First: 0x2000, Last: 0x2fff}, 0x0002c90300b00001},
	} {
		f := c.Fabrics[i]
		if f.Name != tt.name {
			t.Fatalf("fabric %d is %s, want %s", i, f.Name, tt.name)
		}
		v := c.FabricConfig(f)
		guid, err := v.OpenSMGUID()
		if err != nil || v.OpenSM.ConfigDir != tt.configDir || !slices.Equal(v.PhysicalNetworks, tt.physnets) ||
			v.UFMPKeys.PKeyRange != tt.pkeys || guid != tt.guid || v.Name != tt.name || v.Config != c {
			t.Errorf("%s: its configuration is fabric %s of its file (%v) with config_dir %s, physical networks %q, "+
				"pkey_range %v, guid %v (%v); want %s, %q, %v, %v", tt.name, v.Name, v.Config == c, v.OpenSM.ConfigDir,
				v.PhysicalNetworks, v.UFMPKeys.PKeyRange, guid, err, tt.configDir, tt.physnets, tt.pkeys, tt.guid)
		}
		if v.API.Token != c.API.Token || v.Database != c.Database {
			t.Errorf("%s: its configuration does not share [api] token and [database] with the file's", tt.name)
		}
		if got := f.CacheDir(); got != tt.cacheDir {
			t.Errorf("%s: CacheDir = %q, want %q", tt.name, got, tt.cacheDir)
		}
		if got := f.Label("applier"); got != tt.label {
			t.Errorf("%s: Label = %q, want %q", tt.name, got, tt.label)
		}
		boom := errors.New("boom")
		if got := f.Wrap(boom); got.Error() != tt.wrapped || !errors.Is(got, boom) || f.Wrap(nil) != nil {
			t.Errorf("%s: Wrap = %v, want %q wrapping the error", tt.name, got, tt.wrapped)
		}
		// The pkeys API's settings are the file's own: a SIGHUP's new
		// password written through them is the one every later read sees.
		p := c.UFMPKeysOf(tt.name)
		if p == nil || p.PKeyRange != tt.pkeys {
			t.Fatalf("%s: UFMPKeysOf = %+v, want its [ufm_pkeys]", tt.name, p)
		}
		p.Password = "rotated-password-of-" + tt.name
		if got := c.Fabrics[i].UFMPKeys.Password; got != p.Password {
			t.Errorf("%s: the password written through UFMPKeysOf is not the file's: %q", tt.name, got)
		}
	}
	if p := c.UFMPKeysOf("compute"); p != nil {
		t.Errorf("UFMPKeysOf of no configured fabric = %+v, want nil", p)
	}
}
