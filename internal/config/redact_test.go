package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func secretConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Parse(strings.NewReader(`
[api]
token = s3cret-token
previous_tokens = s3cret-old-token-1, s3cret-old-token-2
metrics_token = s3cret-metrics
[ufm_pkeys]
username = ib-kubernetes
password = s3cret-pkeys-password
previous_passwords = s3cret-old-pkeys-password
pkey_range = 0x1000-0x1fff
[ufm_pkeys:nico]
token = s3cret-nico-token
previous_tokens = s3cret-nico-old-token
username = nico
password = s3cret-nico-password
previous_passwords = s3cret-nico-old-password
pkey_range = 0x2000-0x2fff
[database]
connection = postgresql://afm:s3cret-pw@db/afm?password=s3cret-pw2
[opensm]
hardening = none
[opensm_conf]
sm_key = 0xs3cret
m_key_lookup = TRUE
`), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRedacted(t *testing.T) {
	c := secretConfig(t)
	r := c.Redacted()

	if r.API.Token != "xxxxx" {
		t.Errorf("token = %q, want xxxxx", r.API.Token)
	}
	if want := []string{"xxxxx", "xxxxx"}; !slices.Equal(r.API.PreviousTokens, want) {
		t.Errorf("previous_tokens = %q, want %q", r.API.PreviousTokens, want)
	}
	if want := []string{"xxxxx"}; !slices.Equal(r.Fabrics[0].UFMPKeys.PreviousPasswords, want) {
		t.Errorf("previous_passwords = %q, want %q", r.Fabrics[0].UFMPKeys.PreviousPasswords, want)
	}
	if want := "postgresql://afm:xxxxx@db/afm?password=xxxxx"; r.Database.Connection != want {
		t.Errorf("connection = %q, want %q", r.Database.Connection, want)
	}
	wantConf := []KeyValue{{"sm_key", "xxxxx"}, {"m_key_lookup", "TRUE"}}
	if fmt.Sprint(r.Fabrics[0].OpenSMConf) != fmt.Sprint(wantConf) {
		t.Errorf("opensm_conf = %v, want %v", r.Fabrics[0].OpenSMConf, wantConf)
	}

	// The copy must not share storage with the original.
	if c.API.Token != "s3cret-token" || c.Fabrics[0].OpenSMConf[0].Value != "0xs3cret" {
		t.Errorf("Redacted changed the original: %#v", *c)
	}
	r.Fabrics[0].OpenSM.Command[0] = "changed"
	if c.Fabrics[0].OpenSM.Command[0] != "opensm" {
		t.Error("Redacted's Command shares its array with the original")
	}
}

// TestPrintingNeverShowsSecrets logs and prints a Config the ways code is likely to.
func TestPrintingNeverShowsSecrets(t *testing.T) {
	c := secretConfig(t)
	var logged bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logged, nil))
	logger.Info("starting", "config", c)
	logger.Info("starting", "config", *c)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("starting", "config", c)

	//lint:ignore S1025 what fmt's %s verb prints is what is under test
	percentS := fmt.Sprintf("%s", c)
	outputs := map[string]string{
		"slog":       logged.String(),
		"fmt %v":     fmt.Sprintf("%v", c),
		"fmt %+v":    fmt.Sprintf("%+v", *c),
		"fmt %s":     percentS,
		"String":     c.String(),
		"Redacted()": fmt.Sprintf("%#v", c.Redacted()),
	}
	for how, out := range outputs {
		if strings.Contains(out, "s3cret") {
			t.Errorf("%s shows a secret: %s", how, out)
		}
		if !strings.Contains(out, "127.0.0.1:8090") || !strings.Contains(out, "m_key_lookup") || !strings.Contains(out, "nico") {
			t.Errorf("%s lacks the non-secret values: %s", how, out)
		}
	}
}
