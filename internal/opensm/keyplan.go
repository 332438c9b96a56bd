package opensm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The keys as the manager records them: one secret a key, named by the
// opensm.conf option it is written to, its value as FormatKey writes it. What
// an import of another manager's keys and a rotation record is planned here,
// beside the keys; the store keeps the secrets, in one transaction.

// Names of OpenSM's keys among the recorded secrets: the opensm.conf option
// each one is written to.
const (
	SecretMKey  = "m_key"
	SecretSMKey = "sm_key"
	SecretSAKey = "sa_key"
)

// KeysRecordedHint explains a refused import over other keys.
const KeysRecordedHint = "replacing recorded keys is a rotation: follow docs/key-rotation.md, then add --replace-keys"

// NewSecrets generates keys as the secrets a new database records.
func NewSecrets() (map[string]string, error) {
	k, err := GenerateKeys()
	if err != nil {
		return nil, err
	}
	return map[string]string{
		SecretMKey:  FormatKey(k.MKey),
		SecretSMKey: FormatKey(k.SMKey),
		SecretSAKey: FormatKey(k.SAKey),
	}, nil
}

// KeysOf reads the keys out of the recorded secrets; an error names the
// secret, never its value.
func KeysOf(recorded map[string]string) (Keys, error) {
	var k Keys
	for _, s := range keySlots {
		v, err := parseKey(recorded[s.name])
		if err != nil {
			// Never the value: it is a secret, even when malformed.
			return Keys{}, fmt.Errorf("OpenSM keys: secret %s in the database: %w", s.name, err)
		}
		*s.field(&k) = v
	}
	if err := k.Check(); err != nil {
		return Keys{}, fmt.Errorf("OpenSM keys in the database: %w", err)
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

// keySlot is one of OpenSM's keys: its secret's name, the hardening group
// that writes it into opensm.conf, and OpenSM's own default (no protection).
type keySlot struct {
	name       string
	group      Group
	osmDefault uint64
	field      func(*Keys) *uint64
	conf       func(ConfKeys) *uint64
}

var keySlots = []keySlot{
	{SecretMKey, GroupMKey, 0, func(k *Keys) *uint64 { return &k.MKey }, func(c ConfKeys) *uint64 { return c.MKey }},
	{SecretSMKey, GroupKeys, 1, func(k *Keys) *uint64 { return &k.SMKey }, func(c ConfKeys) *uint64 { return c.SMKey }},
	{SecretSAKey, GroupKeys, 1, func(k *Keys) *uint64 { return &k.SAKey }, func(c ConfKeys) *uint64 { return c.SAKey }},
}

// PlanImport returns the secrets an import of file's keys (conf) records,
// and a line per key saying what became of it. A key the file sets is
// imported; a key it does not set, or sets to OpenSM's default while its
// hardening group is off (the other manager did not use it), keeps its
// recorded value or is generated. A key its group needs may not be 0, 1 or
// all ones, and the result must pass Keys.Check. Keys that differ from
// recorded ones need replace.
func PlanImport(recorded map[string]string, conf ConfKeys, h Hardening, file string, replace bool) (map[string]string, []string, error) {
	fresh, err := GenerateKeys()
	if err != nil {
		return nil, nil, err
	}
	var k Keys
	values := map[string]string{}
	var done, replaced []string
	var errs []error
	for _, s := range keySlots {
		line, err := s.imported(&k, fresh, recorded, conf, h, file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, line)
		values[s.name] = FormatKey(*s.field(&k))
		if old, ok := recorded[s.name]; ok && old != values[s.name] {
			replaced = append(replaced, s.name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	if err := k.Check(); err != nil {
		return nil, nil, fmt.Errorf("the keys of %s: %w", file, err)
	}
	if len(replaced) > 0 && !replace {
		return nil, nil, fmt.Errorf("the database holds other keys for %s: %s", strings.Join(replaced, ", "), KeysRecordedHint)
	}
	return values, done, nil
}

// imported sets s's key in k as an import of file takes it: from conf, as
// recorded, or fresh's; the line says which.
func (s keySlot) imported(k *Keys, fresh Keys, recorded map[string]string, conf ConfKeys, h Hardening, file string) (string, error) {
	v := s.conf(conf)
	switch {
	case v != nil && (h.Has(s.group) || *v != s.osmDefault):
		if h.Has(s.group) && (*v == 0 || *v == 1 || *v == ^uint64(0)) {
			return "", fmt.Errorf("%s in %s is 0, 1 or all ones, which [opensm] hardening group %s refuses "+
				"(anyone would try it): remove the line from a copy of the file to have a new key generated", s.name, file, s.group)
		}
		*s.field(k) = *v
		return s.name + ": imported from " + file, nil
	case recorded[s.name] != "":
		var err error
		if *s.field(k), err = parseKey(recorded[s.name]); err != nil {
			return "", fmt.Errorf("secret %s in the database: %w", s.name, err)
		}
		return s.name + ": kept as recorded (" + file + " does not set one in use)", nil
	default:
		*s.field(k) = *s.field(&fresh)
		return s.name + ": generated (" + file + " does not set one in use)", nil
	}
}

// KeyRotation is the keys --rotate-keys names.
type KeyRotation struct{ slots []keySlot }

// ParseKeyRotation reads names of keys separated by commas.
func ParseKeyRotation(list string) (KeyRotation, error) {
	var slots []keySlot
	for w := range strings.SplitSeq(list, ",") {
		w = strings.TrimSpace(w)
		i := slices.IndexFunc(keySlots, func(s keySlot) bool { return s.name == w })
		switch {
		case i < 0:
			return KeyRotation{}, fmt.Errorf("unknown key %q: the keys are m_key, sm_key and sa_key", w)
		case slices.ContainsFunc(slots, func(s keySlot) bool { return s.name == w }):
			return KeyRotation{}, fmt.Errorf("key %s given twice", w)
		}
		slots = append(slots, keySlots[i])
	}
	return KeyRotation{slots: slots}, nil
}

// Plan returns new random keys (crypto/rand) for the named keys, each
// different from the key it replaces and from the others, as the secrets to
// record, and a line per key.
func (r KeyRotation) Plan(recorded map[string]string) (map[string]string, []string, error) {
	if len(recorded) == 0 {
		return nil, nil, errors.New("no OpenSM keys recorded yet: the manager creates them when it first starts (or import them with --import-keys)")
	}
	old, err := KeysOf(recorded)
	if err != nil {
		return nil, nil, err
	}
	for range 10 { // a draw that fails has a probability of about 2^-62
		fresh, err := GenerateKeys()
		if err != nil {
			return nil, nil, err
		}
		k, values, done := old, map[string]string{}, []string(nil)
		for _, s := range r.slots {
			*s.field(&k) = *s.field(&fresh)
			values[s.name] = FormatKey(*s.field(&k))
			done = append(done, s.name+": rotated")
		}
		if k.Check() == nil && !slices.ContainsFunc(r.slots, func(s keySlot) bool { return *s.field(&k) == *s.field(&old) }) {
			return values, done, nil
		}
	}
	return nil, nil, errors.New("generate OpenSM keys: the random source keeps returning unusable values")
}
