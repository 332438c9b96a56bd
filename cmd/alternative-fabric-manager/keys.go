package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Names of OpenSM's keys in the secrets table: the opensm.conf option each
// one is written to.
const (
	secretMKey  = "m_key"
	secretSMKey = "sm_key"
	secretSAKey = "sa_key"
)

// SecretStore is where the keys are kept (store.Store).
type SecretStore interface {
	GetOrCreateSecrets(ctx context.Context, generate func() (map[string]string, error)) (map[string]string, error)
	secretReader
}

// secretReader reads the recorded secrets, creating none (store.Store).
type secretReader interface {
	Secrets(ctx context.Context) (map[string]string, error)
}

// databaseKeys is the opensm.KeySource of a manager: the keys live in the
// database, created by whichever manager starts first, so every start and
// every replica writes the same keys into opensm.conf.
type databaseKeys struct{ store SecretStore }

// Keys returns the recorded keys, creating them on a new database.
func (d databaseKeys) Keys(ctx context.Context) (opensm.Keys, error) {
	recorded, err := d.store.GetOrCreateSecrets(ctx, func() (map[string]string, error) {
		k, err := opensm.GenerateKeys()
		if err != nil {
			return nil, err
		}
		return map[string]string{
			secretMKey:  opensm.FormatKey(k.MKey),
			secretSMKey: opensm.FormatKey(k.SMKey),
			secretSAKey: opensm.FormatKey(k.SAKey),
		}, nil
	})
	if err != nil {
		return opensm.Keys{}, fmt.Errorf("OpenSM keys: %w", err)
	}
	return parseKeys(recorded)
}

// RecordedKeys is Keys creating none: one read of the secrets, where Keys
// is a write transaction. The reads of the fabric ask for the M_Key at every
// read-back and second-SM look, after the manager's start created the keys
// (readbackMKeys).
func (d databaseKeys) RecordedKeys(ctx context.Context) (opensm.Keys, error) {
	return recordedKeys(ctx, d.store)
}

// recordedKeys returns the keys the database holds, creating none: a command
// that only reads must not choose the fabric's keys before any manager ran.
func recordedKeys(ctx context.Context, st secretReader) (opensm.Keys, error) {
	recorded, err := st.Secrets(ctx)
	if err != nil {
		return opensm.Keys{}, fmt.Errorf("OpenSM keys: %w", err)
	}
	if len(recorded) == 0 {
		return opensm.Keys{}, errors.New("no OpenSM keys recorded yet: the manager creates them when it first starts")
	}
	return parseKeys(recorded)
}

// parseKeys reads the keys out of the recorded secrets.
func parseKeys(recorded map[string]string) (opensm.Keys, error) {
	var k opensm.Keys
	for _, f := range []struct {
		name string
		key  *uint64
	}{{secretMKey, &k.MKey}, {secretSMKey, &k.SMKey}, {secretSAKey, &k.SAKey}} {
		v, err := parseKey(recorded[f.name])
		if err != nil {
			// Never the value: it is a secret, even when malformed.
			return opensm.Keys{}, fmt.Errorf("OpenSM keys: secret %s in the database: %w", f.name, err)
		}
		*f.key = v
	}
	if err := k.Check(); err != nil {
		return opensm.Keys{}, fmt.Errorf("OpenSM keys in the database: %w", err)
	}
	return k, nil
}

// parseKey reads a key as FormatKey writes it.
func parseKey(s string) (uint64, error) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok || len(hex) != 16 {
		return 0, fmt.Errorf("want 0x and 16 hexadecimal digits (value not shown)")
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("want 0x and 16 hexadecimal digits (value not shown)")
	}
	return v, nil
}

// printKeys writes the keys, one "name value" line each, then how the
// diagnostic tools take them.
func printKeys(w io.Writer, k opensm.Keys) error {
	_, err := fmt.Fprintf(w, `%s %s
%s %s
%s %s
# These keys protect the fabric: keep them as secret as the database.
# Tools that send SMPs need the M_Key, for example:
#   smpquery -y %s portinfo -G <switch GUID> <port>
#   ibnetdiscover -y %s
# Trusted SA queries need the SA key:
#   saquery --smkey %s PIR
`, secretMKey, opensm.FormatKey(k.MKey), secretSMKey, opensm.FormatKey(k.SMKey), secretSAKey, opensm.FormatKey(k.SAKey),
		opensm.FormatKey(k.MKey), opensm.FormatKey(k.MKey), opensm.FormatKey(k.SAKey))
	return err
}

var _ SecretStore = (*store.Store)(nil)

// keysCommand is --import-keys FILE [--replace-keys], or --rotate-keys NAMES.
type keysCommand struct {
	importFile string // an opensm.conf another manager wrote
	replace    bool   // the import may replace recorded keys
	rotate     string // key names, separated by commas
	fabric     string // the fabric whose keys these are (--fabric)
}

// keySlot is one of OpenSM's keys: its secret's name, the hardening group
// that writes it into opensm.conf, and OpenSM's own default (no protection).
type keySlot struct {
	name       string
	group      opensm.Group
	osmDefault uint64
	field      func(*opensm.Keys) *uint64
	conf       func(opensm.ConfKeys) *uint64
}

var keySlots = []keySlot{
	{secretMKey, opensm.GroupMKey, 0, func(k *opensm.Keys) *uint64 { return &k.MKey }, func(c opensm.ConfKeys) *uint64 { return c.MKey }},
	{secretSMKey, opensm.GroupKeys, 1, func(k *opensm.Keys) *uint64 { return &k.SMKey }, func(c opensm.ConfKeys) *uint64 { return c.SMKey }},
	{secretSAKey, opensm.GroupKeys, 1, func(k *opensm.Keys) *uint64 { return &k.SAKey }, func(c opensm.ConfKeys) *uint64 { return c.SAKey }},
}

// errKeysRecorded explains a refused import over other keys.
const errKeysRecorded = "replacing recorded keys is a rotation: follow docs/key-rotation.md, then add --replace-keys"

// runKeys imports or rotates OpenSM's keys in the database, in one
// transaction, printing what it did (never a key). The running managers
// write the keys into opensm.conf when they start: the output says so.
func runKeys(ctx context.Context, path string, log *slog.Logger, c keysCommand) error {
	if c.replace && c.importFile == "" {
		return errors.New("--replace-keys goes with --import-keys")
	}
	var conf opensm.ConfKeys
	var rotate []keySlot
	var err error
	if c.importFile != "" {
		if conf, err = readConfKeys(c.importFile); err != nil {
			return err
		}
	} else if rotate, err = parseKeyNames(c.rotate); err != nil {
		return fmt.Errorf("--rotate-keys: %w", err)
	}
	return withOperatorStore(ctx, path, c.fabric, log, func(ctx context.Context, f operatorFabric, st *store.Store) error {
		recorded, err := st.Secrets(ctx)
		if err != nil {
			return err
		}
		var values map[string]string
		var done []string
		if c.importFile != "" {
			values, done, err = plannedImport(recorded, conf, f.cfg.OpenSM.Hardening, c)
		} else {
			values, done, err = plannedRotation(recorded, rotate)
		}
		if err != nil {
			return err
		}
		if _, err := st.SetSecrets(ctx, values, c.replace || len(rotate) > 0); errors.Is(err, store.ErrSecretsDiffer) {
			return fmt.Errorf("%w: %s", err, errKeysRecorded) // another command, or a manager's first start, came first
		} else if err != nil {
			return err
		}
		fmt.Fprintf(os.Stdout, "%s\n# The leading manager keeps its keys until it restarts; a follower takes these when it next leads: docs/key-rotation.md.\n",
			strings.Join(done, "\n"))
		return nil
	})
}

// readConfKeys reads the keys an opensm.conf sets.
func readConfKeys(file string) (opensm.ConfKeys, error) {
	f, err := os.Open(file)
	if err != nil {
		return opensm.ConfKeys{}, fmt.Errorf("--import-keys: %w", err)
	}
	defer f.Close()
	conf, err := opensm.ReadConfKeys(f)
	if err != nil {
		return opensm.ConfKeys{}, fmt.Errorf("--import-keys %s: %w", file, err)
	}
	return conf, nil
}

// plannedImport returns the secrets an import records and a line per key
// saying what became of it. A key the file sets is imported; a key it does
// not set, or sets to OpenSM's default while its hardening group is off (the
// other manager did not use it), keeps its recorded value or is generated.
// A key its group needs may not be 0, 1 or all ones, and the result must
// pass Keys.Check. Keys that differ from recorded ones need c.replace.
func plannedImport(recorded map[string]string, conf opensm.ConfKeys, h opensm.Hardening, c keysCommand) (map[string]string, []string, error) {
	fresh, err := opensm.GenerateKeys()
	if err != nil {
		return nil, nil, err
	}
	var k opensm.Keys
	values := map[string]string{}
	var done, replaced []string
	var errs []error
	for _, s := range keySlots {
		v := s.conf(conf)
		switch {
		case v != nil && (h.Has(s.group) || *v != s.osmDefault):
			if h.Has(s.group) && (*v == 0 || *v == 1 || *v == ^uint64(0)) {
				errs = append(errs, fmt.Errorf("%s in %s is 0, 1 or all ones, which [opensm] hardening group %s refuses "+
					"(anyone would try it): remove the line from a copy of the file to have a new key generated", s.name, c.importFile, s.group))
				continue
			}
			*s.field(&k) = *v
			done = append(done, s.name+": imported from "+c.importFile)
		case recorded[s.name] != "":
			if *s.field(&k), err = parseKey(recorded[s.name]); err != nil {
				errs = append(errs, fmt.Errorf("secret %s in the database: %w", s.name, err))
			}
			done = append(done, s.name+": kept as recorded ("+c.importFile+" does not set one in use)")
		default:
			*s.field(&k) = *s.field(&fresh)
			done = append(done, s.name+": generated ("+c.importFile+" does not set one in use)")
		}
		values[s.name] = opensm.FormatKey(*s.field(&k))
		if old, ok := recorded[s.name]; ok && old != values[s.name] {
			replaced = append(replaced, s.name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	if err := k.Check(); err != nil {
		return nil, nil, fmt.Errorf("the keys of %s: %w", c.importFile, err)
	}
	if len(replaced) > 0 && !c.replace {
		return nil, nil, fmt.Errorf("the database holds other keys for %s: %s", strings.Join(replaced, ", "), errKeysRecorded)
	}
	return values, done, nil
}

// parseKeyNames reads --rotate-keys: names of keys separated by commas.
func parseKeyNames(list string) ([]keySlot, error) {
	var slots []keySlot
	for w := range strings.SplitSeq(list, ",") {
		w = strings.TrimSpace(w)
		i := slices.IndexFunc(keySlots, func(s keySlot) bool { return s.name == w })
		switch {
		case i < 0:
			return nil, fmt.Errorf("unknown key %q: the keys are m_key, sm_key and sa_key", w)
		case slices.ContainsFunc(slots, func(s keySlot) bool { return s.name == w }):
			return nil, fmt.Errorf("key %s given twice", w)
		}
		slots = append(slots, keySlots[i])
	}
	return slots, nil
}

// plannedRotation returns new random keys (crypto/rand) for the named
// slots, each different from the key it replaces and from the others.
func plannedRotation(recorded map[string]string, rotate []keySlot) (map[string]string, []string, error) {
	if len(recorded) == 0 {
		return nil, nil, errors.New("no OpenSM keys recorded yet: the manager creates them when it first starts (or import them with --import-keys)")
	}
	old, err := parseKeys(recorded)
	if err != nil {
		return nil, nil, err
	}
	for range 10 { // a draw that fails has a probability of about 2^-62
		fresh, err := opensm.GenerateKeys()
		if err != nil {
			return nil, nil, err
		}
		k, values, done := old, map[string]string{}, []string(nil)
		for _, s := range rotate {
			*s.field(&k) = *s.field(&fresh)
			values[s.name] = opensm.FormatKey(*s.field(&k))
			done = append(done, s.name+": rotated")
		}
		if k.Check() == nil && !slices.ContainsFunc(rotate, func(s keySlot) bool { return *s.field(&k) == *s.field(&old) }) {
			return values, done, nil
		}
	}
	return nil, nil, errors.New("generate OpenSM keys: the random source keeps returning unusable values")
}
