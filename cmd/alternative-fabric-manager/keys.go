package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// recordedKeys returns the keys the database holds, creating none: a command
// that only reads must not choose the fabric's keys before any manager ran.
func recordedKeys(ctx context.Context, st *store.Store) (opensm.Keys, error) {
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
