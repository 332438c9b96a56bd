package config

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// redactedMask replaces a secret in printable forms of the configuration.
const redactedMask = "xxxxx"

// Redacted returns a copy of c that is safe to print: the tokens, the pkeys
// API's password, any password in the database URL, and the values of
// [opensm_conf] options that hold keys (m_key, sm_key, sa_key, ...) are masked.
func (c Config) Redacted() Config {
	r := c
	if r.API.Token != "" {
		r.API.Token = redactedMask
	}
	if r.API.MetricsToken != "" {
		r.API.MetricsToken = redactedMask
	}
	r.API.PreviousTokens = masked(c.API.PreviousTokens)
	r.Database.Connection = RedactURL(c.Database.Connection)
	r.Fabrics = make([]Fabric, len(c.Fabrics))
	for i, f := range c.Fabrics {
		r.Fabrics[i] = f.redacted()
	}
	if c.Fabrics == nil {
		r.Fabrics = nil
	}
	r.PKeysClients = redactedClients(c.PKeysClients)
	return r
}

// redacted is f with its secrets masked.
func (f Fabric) redacted() Fabric {
	r := f
	if r.UFMPKeys.Password != "" {
		r.UFMPKeys.Password = redactedMask
	}
	r.UFMPKeys.PreviousPasswords = masked(f.UFMPKeys.PreviousPasswords)
	r.PhysicalNetworks = slices.Clone(f.PhysicalNetworks)
	r.OpenSM.Command = slices.Clone(f.OpenSM.Command)
	r.OpenSM.Hardening.Groups = slices.Clone(f.OpenSM.Hardening.Groups)
	r.OpenSMConf = maskedOptions(f.OpenSMConf)
	return r
}

// maskedOptions is a copy of opensm.conf options with the keys' values masked.
func maskedOptions(kvs []KeyValue) []KeyValue {
	out := slices.Clone(kvs)
	for i, kv := range out {
		if isSecretOption(kv.Key) {
			out[i].Value = redactedMask
		}
	}
	return out
}

// isSecretOption says whether an opensm.conf option holds a secret. OpenSM's keys
// are the options named *_key; m_key_lookup and the like are not secrets.
func isSecretOption(key string) bool {
	k := strings.ToLower(key)
	return strings.HasSuffix(k, "_key") || strings.Contains(k, "password") || strings.Contains(k, "secret")
}

// masked is one mask for each of secrets: how many there are is not a secret.
func masked(secrets []string) []string {
	if secrets == nil {
		return nil
	}
	out := make([]string, len(secrets))
	for i := range out {
		out[i] = redactedMask
	}
	return out
}

// LogValue makes slog print the redacted configuration, as groups named after the
// file's sections, so that logging a Config can never leak a secret.
func (c Config) LogValue() slog.Value {
	r := c.Redacted()
	def := r.Fabrics[0] // the top-level sections of the file
	return slog.GroupValue(
		slog.Group("api",
			slog.String("listen", r.API.Listen),
			slog.String("prefix", r.API.Prefix),
			slog.String("domain", r.API.Domain),
			slog.String("token", r.API.Token),
			slog.String("previous_tokens", strings.Join(r.API.PreviousTokens, ",")),
			slog.String("physical_networks", strings.Join(def.PhysicalNetworks, ",")),
			slog.String("tls_cert_file", r.API.TLSCertFile),
			slog.String("tls_key_file", r.API.TLSKeyFile),
			slog.Bool("check_host", r.API.CheckHost),
			slog.Bool("access_log", r.API.AccessLog),
			slog.String("metrics_listen", r.API.MetricsListen),
			slog.String("metrics_token", r.API.MetricsToken),
			slog.String("debug_listen", r.API.DebugListen),
		),
		slog.Group("log", slog.String("format", r.Log.Format)),
		slog.Group("database",
			slog.String("connection", r.Database.Connection),
			slog.Bool("auto_migrate", r.Database.AutoMigrate),
			slog.String("poll_interval", r.Database.PollInterval.String()),
		),
		slog.Group("ha", slog.Bool("ha", r.HA.HA), slog.String("lease_timeout", r.HA.LeaseTimeout.String())),
		slog.Group("opensm",
			slog.String("driver", def.OpenSM.Driver),
			slog.Any("command", def.OpenSM.Command),
			slog.String("user", def.OpenSM.User),
			slog.String("env_file", def.OpenSM.EnvFile),
			slog.String("config_dir", def.OpenSM.ConfigDir),
			slog.String("log_file", def.OpenSM.LogFile),
			slog.String("check_interval", def.OpenSM.CheckInterval.String()),
			slog.String("sweep_timeout", def.OpenSM.SweepTimeout.String()),
			slog.String("flat_pkey", def.OpenSM.FlatPKey.String()),
			slog.String("default_partition", def.OpenSM.DefaultPartition),
			slog.Any("hardening", def.OpenSM.Hardening.Groups),
			slog.Int("m_key_protection_level", def.OpenSM.Hardening.MKeyProtectionLevel),
			slog.Int("m_key_lease_period", def.OpenSM.Hardening.MKeyLeasePeriod),
			slog.String("verify", def.OpenSM.Verify),
			slog.String("verify_timeout", def.OpenSM.VerifyTimeout.String()),
			slog.String("smp_port", def.OpenSM.SMPPort),
			slog.String("audit_interval", def.OpenSM.AuditInterval.String()),
		),
		optionsAttr(def.OpenSMConf),
		slog.Attr{Key: "fabrics", Value: slog.GroupValue(fabricAttrs(r.Fabrics[1:])...)},
		slog.Attr{Key: "ufm_pkeys_clients", Value: slog.GroupValue(clientAttrs(r.PKeysClients)...)},
	)
}

// optionsAttr is a fabric's OpenSM options, already redacted, as the group
// of their section.
func optionsAttr(options []KeyValue) slog.Attr {
	conf := make([]slog.Attr, len(options))
	for i, kv := range options {
		conf[i] = slog.String(kv.Key, kv.Value)
	}
	return slog.Attr{Key: opensmConfSection, Value: slog.GroupValue(conf...)}
}

// fabricAttrs are the further fabrics, already redacted, one group each,
// with the settings that tell them apart.
func fabricAttrs(fabrics []Fabric) []slog.Attr {
	attrs := make([]slog.Attr, len(fabrics))
	for i, f := range fabrics {
		attrs[i] = slog.Group(f.Name,
			slog.String("physical_networks", strings.Join(f.PhysicalNetworks, ",")),
			slog.String("driver", f.OpenSM.Driver),
			slog.Any("command", f.OpenSM.Command),
			slog.String("user", f.OpenSM.User),
			slog.String("env_file", f.OpenSM.EnvFile),
			slog.String("config_dir", f.OpenSM.ConfigDir),
			slog.String("log_file", f.OpenSM.LogFile),
			slog.String("ufm_pkeys_username", f.UFMPKeys.Username),
			slog.String("ufm_pkeys_password", f.UFMPKeys.Password),
			slog.String("ufm_pkeys_listen", f.UFMPKeys.Listen),
			optionsAttr(f.OpenSMConf),
		)
	}
	return attrs
}

// String prints the redacted configuration on one line, so that fmt never
// prints the token either.
func (c Config) String() string {
	var b strings.Builder
	var write func(prefix string, attrs []slog.Attr)
	write = func(prefix string, attrs []slog.Attr) {
		for _, a := range attrs {
			if a.Value.Kind() == slog.KindGroup {
				write(prefix+a.Key+".", a.Value.Group())
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s%s=%q", prefix, a.Key, a.Value.String())
		}
	}
	write("", c.LogValue().Group())
	return b.String()
}
