package manager

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// clientsConf has a [ufm_pkeys:nico] client with a token under networking-mlnx's
// prefix; %s are its token lines and [opensm] check_interval.
const clientsConf = `[api]
token = s3cret-api-token-0123
[ufm_pkeys:nico]
prefix = /ufmRestV3
pkey_range = 0x2000-0x2fff
%s
[opensm]
check_interval = %s
`

// TestSIGHUPReloadsPKeysClientCredentials: a SIGHUP gives a served
// [ufm_pkeys:NAME] client its new token at once, the previous one accepted
// beside it during a rotation and refused after; other keys need a
// restart. The log names keys, never a secret.
func TestSIGHUPReloadsPKeysClientCredentials(t *testing.T) {
	const oldToken, newToken = "s3cret-nico-old-token", "s3cret-nico-new-token"
	path := filepath.Join(t.TempDir(), "afm.conf")
	writeConfText(t, path, fmt.Sprintf(clientsConf, "token = "+oldToken, "30"))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	web, h, logged := hangupServer(t, path, cfg)
	works := func(token string) bool {
		req, _ := http.NewRequest("GET", web.URL+"/ufmRestV3/resources/pkeys", nil)
		req.Header.Set("Authorization", "Basic "+token)
		return statusCode(t, req) == http.StatusOK
	}
	for _, step := range []struct {
		lines, interval string
		works           map[string]bool
	}{
		{"token = " + newToken + "\nprevious_tokens = " + oldToken, "30", map[string]bool{oldToken: true, newToken: true}},
		{"token = " + newToken, "60", map[string]bool{oldToken: false, newToken: true}},
	} {
		writeConfText(t, path, fmt.Sprintf(clientsConf, step.lines, step.interval))
		h.reload()
		for token, want := range step.works {
			if got := works(token); got != want {
				t.Errorf("after %q: token %s works %t, want %t", step.lines, token[:16], got, want)
			}
		}
	}
	for _, want := range []string{`"reloaded":["[ufm_pkeys:nico] token","[ufm_pkeys:nico] previous_tokens"]`,
		`"reloaded":["[ufm_pkeys:nico] previous_tokens"],"changed_settings_needing_restart":["[opensm] check_interval"]`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logged.String())
		}
	}
	if strings.Contains(logged.String(), "s3cret") {
		t.Errorf("the log shows a secret:\n%s", logged.String())
	}
}

// fixedKeys are recorded keys, for smconfOf.
type fixedKeys opensm.Keys

func (k fixedKeys) Keys(context.Context) (opensm.Keys, error) { return opensm.Keys(k), nil }

// TestSMConfTellsWhatOpenSMRunsWith: /app/smconf's keys are the recorded
// ones where a hardening group writes them, else [opensm_conf]'s, else
// OpenSM's defaults; subnet_prefix and m_key_per_port as [opensm_conf] sets
// them.
func TestSMConfTellsWhatOpenSMRunsWith(t *testing.T) {
	recorded := fixedKeys{MKey: 0xa1, SMKey: 0xb2, SAKey: 0xc3}
	tests := []struct {
		name      string
		hardening []opensm.Group
		conf      []config.KeyValue
		want      api.SMConf
	}{
		{"hardened", []opensm.Group{opensm.GroupMKey, opensm.GroupKeys}, nil, api.SMConf{SubnetPrefix: "0xfe80000000000000",
			MKey: "0x00000000000000a1", SMKey: "0x00000000000000b2", SAKey: "0x00000000000000c3"}},
		{"no hardening", nil, nil, api.SMConf{SubnetPrefix: "0xfe80000000000000",
			MKey: "0x0000000000000000", SMKey: "0x0000000000000001", SAKey: "0x0000000000000001"}},
		{"opensm_conf's", []opensm.Group{opensm.GroupMKey}, []config.KeyValue{{Key: "sm_key", Value: "0x0123456789abcdef"},
			{Key: "subnet_prefix", Value: "0xfe80000000000001"}, {Key: "m_key_per_port", Value: "TRUE"}},
			api.SMConf{SubnetPrefix: "0xfe80000000000001", MKey: "0x00000000000000a1", SMKey: "0x0123456789abcdef",
				SAKey: "0x0000000000000001", MKeyPerPort: true}},
	}
	for _, tt := range tests {
		f := config.Fabric{OpenSM: config.OpenSM{Hardening: opensm.Hardening{Groups: tt.hardening}}, OpenSMConf: tt.conf}
		got, err := smconfOf(f, recorded)(t.Context())
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}
