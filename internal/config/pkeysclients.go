package config

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Several pkeys clients. Beside ib-kubernetes ([ufm_pkeys], per fabric
// [fabric:NAME:ufm_pkeys]), other clients of UFM's pkeys API (NICo, Slurm's
// UFM integration, the UFM SDK's tools) each get a [ufm_pkeys:NAME] section:
// a principal of its own, on the fabric its fabric key names, with its own
// credential, pkey_range and limits. It sees and changes only the pkeys it
// created; its range overlaps no other client's of its fabric, so that two
// clients never ask for one pkey. Its routes are served on [api] listen
// under its prefix; clients sharing a prefix are told apart by their
// credentials.

// pkeysClientPrefix starts the name of every [ufm_pkeys:NAME] section.
const pkeysClientPrefix = "ufm_pkeys:"

// PKeysClient is one [ufm_pkeys:NAME] section.
type PKeysClient struct {
	// Name is NAME: the principal its pkeys and jobs are recorded under.
	Name string
	// Fabric is the fabric its pkeys are on (DefaultFabric unless its fabric
	// key names another).
	Fabric string
	// UFMPKeys are the keys of [ufm_pkeys]: username, password,
	// previous_passwords, prefix, pkey_range and the limits (listen is not
	// one of them: the client is served on [api] listen).
	UFMPKeys
	// Token is what the client sends as "Authorization: Basic <token>"
	// (UFM's token auth, under /ufmRestV3): the token itself, not a base64
	// user:password. PreviousTokens are accepted beside it during a
	// rotation.
	Token          string
	PreviousTokens []string
	// DeleteEmpty removes a pkey when its last GUID leaves it, so that it
	// reads {} (NICo has no delete call); ib-kubernetes keeps its empty pkeys.
	DeleteEmpty bool
	// SMConf lets the client read OpenSM's keys at /app/smconf (NICo judges
	// the fabric's security by them); otherwise that route answers 403.
	SMConf bool
}

// Section is the client's section, as errors and refusals name it.
func (p PKeysClient) Section() string { return "[" + pkeysClientPrefix + p.Name + "]" }

// Enabled says whether the client has a credential: a token, or a username
// and password.
func (p PKeysClient) Enabled() bool { return p.Token != "" || p.UFMPKeys.Enabled() }

// PKeysClientsOf are the [ufm_pkeys:NAME] clients of fabric name, in file
// order.
func (c *Config) PKeysClientsOf(name string) []PKeysClient {
	var out []PKeysClient
	for _, p := range c.PKeysClients {
		if p.Fabric == name {
			out = append(out, p)
		}
	}
	return out
}

// clientField is a key of [ufm_pkeys:NAME] that [ufm_pkeys] lacks.
type clientField struct {
	key, def string
	secret   bool
	set      func(p *PKeysClient, v string) error
}

// pkeysClientFields are the keys of [ufm_pkeys:NAME] beside those of
// [ufm_pkeys].
var pkeysClientFields = []clientField{
	{key: "fabric", def: DefaultFabric, set: func(p *PKeysClient, v string) error {
		if !fabricNamePattern.MatchString(v) {
			return fmt.Errorf("want a fabric's name: %s", fabricNameRule)
		}
		p.Fabric = v
		return nil
	}},
	{key: "token", secret: true, set: func(p *PKeysClient, v string) error { return setString(&p.Token, v) }},
	{key: "previous_tokens", secret: true, set: func(p *PKeysClient, v string) error {
		return setSecretList(&p.PreviousTokens, v)
	}},
	{key: "delete_empty", def: "false", set: func(p *PKeysClient, v string) error { return setBool(&p.DeleteEmpty, v) }},
	{key: "smconf", def: "false", set: func(p *PKeysClient, v string) error { return setBool(&p.SMConf, v) }},
}

// isPKeysClientSection says whether a section's name is [ufm_pkeys:NAME].
func isPKeysClientSection(name string) bool { return strings.HasPrefix(name, pkeysClientPrefix) }

// parsePKeysClients reads the [ufm_pkeys:NAME] sections, in file order.
func parsePKeysClients(file iniFile) ([]PKeysClient, []error) {
	var (
		out  []PKeysClient
		errs []error
	)
	for _, s := range file.sections {
		if !isPKeysClientSection(s.name) {
			continue
		}
		name := strings.TrimPrefix(s.name, pkeysClientPrefix)
		if !fabricNamePattern.MatchString(name) {
			errs = append(errs, fmt.Errorf("[%s] (line %d): client name %q: want %s", s.name, s.line, name, fabricNameRule))
			continue
		}
		p, perrs := readPKeysClient(name, s)
		errs = append(errs, perrs...)
		out = append(out, p)
	}
	return out, errs
}

// readPKeysClient reads one [ufm_pkeys:NAME] section: the keys of
// [ufm_pkeys] into a scratch Config (their fields store there), the others
// into the client, every key at its default unless the section sets it.
func readPKeysClient(name string, s iniSection) (PKeysClient, []error) {
	p := PKeysClient{Name: name}
	scratch := Config{Fabrics: []Fabric{{Name: DefaultFabric}}}
	known := sectionNamed("ufm_pkeys")
	for _, f := range known.fields {
		if f.def != "" {
			_ = f.set(&scratch, f.def) // the defaults of [ufm_pkeys], which parse
		}
	}
	for _, f := range pkeysClientFields {
		if f.def != "" {
			_ = f.set(&p, f.def)
		}
	}
	var errs []error
	for _, e := range s.entries {
		if e.value == "" {
			continue // an empty value leaves the default, as everywhere
		}
		if j := slices.IndexFunc(known.fields, func(f field) bool { return f.key == e.key }); j >= 0 {
			if err := known.fields[j].set(&scratch, e.value); err != nil {
				errs = append(errs, fmt.Errorf("[%s] %s = %s (line %d): %w", s.name, e.key, known.fields[j].show(e.value), e.line, err))
			}
			continue
		}
		j := slices.IndexFunc(pkeysClientFields, func(f clientField) bool { return f.key == e.key })
		if j < 0 {
			errs = append(errs, fmt.Errorf("unknown key %q in [%s] (line %d); known keys: %s, fabric, token, "+
				"previous_tokens, delete_empty, smconf", e.key, s.name, e.line, known.keyNames()))
			continue
		}
		f := pkeysClientFields[j]
		if err := f.set(&p, e.value); err != nil {
			shown := fmt.Sprintf("%q", e.value)
			if f.secret {
				shown = "(not shown)"
			}
			errs = append(errs, fmt.Errorf("[%s] %s = %s (line %d): %w", s.name, e.key, shown, e.line, err))
		}
	}
	p.UFMPKeys = scratch.Fabrics[0].UFMPKeys
	return p, errs
}

// checkPKeysClients checks every client once the fabrics are read: its
// fabric exists, it has a credential, its range is its own, its prefix
// shares no path with another API's, and no credential is another
// principal's.
func (c *Config) checkPKeysClients() []error {
	var errs []error
	for i, p := range c.PKeysClients {
		fab, ok := c.fabricNamed(p.Fabric)
		if !ok {
			errs = append(errs, fmt.Errorf("%s fabric = %s: no such fabric; the fabrics are %s", p.Section(), p.Fabric,
				strings.Join(c.fabricNames(), ", ")))
			continue
		}
		errs = append(errs, c.checkPKeysClient(p, fab)...)
		for _, q := range c.PKeysClients[:i] {
			if q.Fabric == p.Fabric && rangesOverlap(q.PKeyRange, p.PKeyRange) {
				errs = append(errs, fmt.Errorf("%s pkey_range %s and %s pkey_range %s overlap: clients of one fabric "+
					"each need pkeys of their own", q.Section(), q.PKeyRange, p.Section(), p.PKeyRange))
			}
		}
	}
	return append(errs, c.checkPrincipalCredentials()...)
}

// checkPKeysClient checks one client on fabric fab.
func (c *Config) checkPKeysClient(p PKeysClient, fab Fabric) []error {
	sec, u := p.Section(), p.UFMPKeys
	var errs []error
	switch {
	case !p.Enabled():
		errs = append(errs, fmt.Errorf("%s needs a credential: token, or username and password", sec))
	case (u.Username == "") != (u.Password == ""):
		errs = append(errs, fmt.Errorf("%s username and password go together: set both or neither", sec))
	}
	if len(p.PreviousTokens) > 0 && p.Token == "" {
		errs = append(errs, fmt.Errorf("%s previous_tokens is set but token is not: previous tokens are accepted "+
			"only beside a current one", sec))
	}
	if len(u.PreviousPasswords) > 0 && u.Password == "" {
		errs = append(errs, fmt.Errorf("%s previous_passwords is set but password is not: previous passwords are "+
			"accepted only beside a current one", sec))
	}
	switch r := u.PKeyRange; {
	case r.Empty():
		errs = append(errs, fmt.Errorf("%s pkey_range is required: the pkeys this client may use, and no other "+
			"client nor Neutron VLAN may, such as 0x3000-0x3fff", sec))
	case r.Contains(fab.OpenSM.FlatPKey):
		errs = append(errs, fmt.Errorf("%s pkey_range %s holds %s flat_pkey %s, the flat networks' partition",
			sec, r, fab.Section(), fab.OpenSM.FlatPKey))
	case fab.UFMPKeys.Enabled() && rangesOverlap(r, fab.UFMPKeys.PKeyRange):
		errs = append(errs, fmt.Errorf("%s pkey_range %s and %s pkey_range %s overlap: clients of one fabric each "+
			"need pkeys of their own", fab.UFMPKeysSection(), fab.UFMPKeys.PKeyRange, sec, r))
	}
	if u.MaxGUIDsPerRequest > u.MaxMembersPerPKey || u.MaxMembersPerPKey > u.MaxMembers {
		errs = append(errs, fmt.Errorf("%s max_guids_per_request %d, max_members_per_pkey %d and max_members %d: "+
			"want each at most the next", sec, u.MaxGUIDsPerRequest, u.MaxMembersPerPKey, u.MaxMembers))
	}
	return append(errs, c.checkClientPrefix(p)...)
}

// checkClientPrefix refuses a prefix that shares paths with another API on
// [api] listen without being the same: [api] prefix itself is allowed (UFM's
// token clients send /ufmRestV3, networking-mlnx's prefix; the credential
// tells the principals apart), and so is another pkeys API's, but not one
// inside or around either.
func (c *Config) checkClientPrefix(p PKeysClient) []error {
	var errs []error
	others := []struct{ section, prefix string }{{"[api]", c.API.Prefix}}
	for _, f := range c.Fabrics {
		if f.UFMPKeys.Enabled() && f.UFMPKeys.Listen == "" {
			others = append(others, struct{ section, prefix string }{f.UFMPKeysSection(), f.UFMPKeys.Prefix})
		}
	}
	for _, q := range c.PKeysClients {
		if q.Name != p.Name {
			others = append(others, struct{ section, prefix string }{q.Section(), q.Prefix})
		}
	}
	for _, o := range others {
		if o.prefix != p.Prefix && prefixesOverlap(o.prefix, p.Prefix) {
			errs = append(errs, fmt.Errorf("%s prefix %s and %s prefix %s overlap: give the client the same prefix "+
				"or one of its own, such as /ufmRest or /ufmRestV3", p.Section(), p.Prefix, o.section, o.prefix))
		}
	}
	return errs
}

// checkPrincipalCredentials refuses a credential two principals would send
// alike: the API tells principals apart by their Authorization header
// alone, so one header must open one principal's routes. The errors name
// the sections, never a secret.
func (c *Config) checkPrincipalCredentials() []error {
	seen := map[string]string{} // Authorization header -> section
	var errs []error
	add := func(section, header string) {
		if first, dup := seen[header]; dup && first != section {
			errs = append(errs, fmt.Errorf("%s and %s accept the same credential: give each principal its own", first, section))
		}
		seen[header] = section
	}
	for _, t := range append([]string{c.API.Token}, c.API.PreviousTokens...) {
		if t != "" {
			add("[api]", "Basic "+t)
		}
	}
	basic := func(section string, u UFMPKeys) {
		if u.Username == "" {
			return
		}
		for _, pw := range append([]string{u.Password}, u.PreviousPasswords...) {
			add(section, "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username+":"+pw)))
		}
	}
	for _, f := range c.Fabrics {
		basic(f.UFMPKeysSection(), f.UFMPKeys)
	}
	for _, p := range c.PKeysClients {
		basic(p.Section(), p.UFMPKeys)
		for _, t := range append([]string{p.Token}, p.PreviousTokens...) {
			if t != "" {
				add(p.Section(), "Basic "+t)
			}
		}
	}
	return errs
}

// checkPKeysClientSecrets refuses a client's token or password too short to
// resist guessing, as CheckToken does [api] token's.
func (c *Config) checkPKeysClientSecrets() error {
	for _, p := range c.PKeysClients {
		for _, l := range []struct {
			key    string
			values []string
		}{{"token", nonEmpty(p.Token)}, {"previous_tokens", p.PreviousTokens},
			{"password", nonEmpty(p.Password)}, {"previous_passwords", p.PreviousPasswords}} {
			for _, v := range l.values {
				if len(v) < MinTokenLength {
					return fmt.Errorf("%s %s: a value is %d characters long; it must have at least %d. Make one with "+
						"\"openssl rand -hex 32\"", p.Section(), l.key, len(v), MinTokenLength)
				}
			}
		}
	}
	return nil
}

// rangesOverlap says whether two configured (not empty) ranges share a pkey.
func rangesOverlap(a, b fabric.PKeyRange) bool {
	return !a.Empty() && !b.Empty() && a.First <= b.Last && b.First <= a.Last
}

func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// fabricNamed is the fabric of c named name.
func (c *Config) fabricNamed(name string) (Fabric, bool) {
	all := c.Fabrics
	i := slices.IndexFunc(all, func(f Fabric) bool { return f.Name == name })
	if i < 0 {
		return Fabric{}, false
	}
	return all[i], true
}

func (c *Config) fabricNames() []string {
	var out []string
	for _, f := range c.Fabrics {
		out = append(out, f.Name)
	}
	return out
}

// diffPKeysClients names the [ufm_pkeys:NAME] sections added or removed, and
// the keys changed in a client in both ("[ufm_pkeys:nico] token").
func diffPKeysClients(a, b []PKeysClient) []string {
	var out []string
	find := func(ps []PKeysClient, name string) (PKeysClient, bool) {
		i := slices.IndexFunc(ps, func(p PKeysClient) bool { return p.Name == name })
		if i < 0 {
			return PKeysClient{}, false
		}
		return ps[i], true
	}
	for _, pa := range a {
		pb, ok := find(b, pa.Name)
		if !ok {
			out = append(out, pa.Section())
			continue
		}
		ca, cb := Config{Fabrics: []Fabric{{UFMPKeys: pa.UFMPKeys}}}, Config{Fabrics: []Fabric{{UFMPKeys: pb.UFMPKeys}}}
		for _, k := range keyGetters {
			if k.section == "ufm_pkeys" && !reflect.DeepEqual(k.get(&ca), k.get(&cb)) {
				out = append(out, pa.Section()+" "+k.key)
			}
		}
		for _, k := range []struct {
			key  string
			a, b any
		}{{"fabric", pa.Fabric, pb.Fabric}, {"token", pa.Token, pb.Token}, {"previous_tokens", pa.PreviousTokens, pb.PreviousTokens},
			{"delete_empty", pa.DeleteEmpty, pb.DeleteEmpty}, {"smconf", pa.SMConf, pb.SMConf}} {
			if !reflect.DeepEqual(k.a, k.b) {
				out = append(out, pa.Section()+" "+k.key)
			}
		}
	}
	for _, pb := range b {
		if _, ok := find(a, pb.Name); !ok {
			out = append(out, pb.Section())
		}
	}
	return out
}

// redactedClients are clients with their secrets masked, as Redacted masks
// [ufm_pkeys]'s.
func redactedClients(clients []PKeysClient) []PKeysClient {
	if clients == nil {
		return nil
	}
	out := make([]PKeysClient, len(clients))
	for i, p := range clients {
		r := p
		if r.Password != "" {
			r.Password = redactedMask
		}
		if r.Token != "" {
			r.Token = redactedMask
		}
		r.PreviousPasswords, r.PreviousTokens = masked(p.PreviousPasswords), masked(p.PreviousTokens)
		out[i] = r
	}
	return out
}

// clientAttrs are the clients, already redacted, one group each.
func clientAttrs(clients []PKeysClient) []slog.Attr {
	attrs := make([]slog.Attr, len(clients))
	for i, p := range clients {
		attrs[i] = slog.Group(p.Name,
			slog.String("fabric", p.Fabric),
			slog.String("prefix", p.Prefix),
			slog.String("pkey_range", p.PKeyRange.String()),
			slog.String("username", p.Username),
			slog.String("password", p.Password),
			slog.String("token", p.Token),
			slog.Bool("delete_empty", p.DeleteEmpty),
			slog.Bool("smconf", p.SMConf),
		)
	}
	return attrs
}
