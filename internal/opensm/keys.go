package opensm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
)

// Keys are the secrets OpenSM protects the fabric with (see docs/opensm-hardening.md):
//
//   - MKey, the M_Key OpenSM writes into every port: with protection level 2 a
//     port answers management datagrams (SMPs) only when they carry it;
//   - SMKey, the SM_Key: SMs ignore each other unless their SM_Keys match;
//   - SAKey, the key that makes a request to the subnet administrator (SA)
//     trusted: trusted requests read every port's M_Key and P_Key table.
//
// Every SM of a subnet needs the same three keys. A Keys value never prints its
// keys through fmt or log/slog: String, GoString, Format and LogValue all
// return a redacted form. Read the fields to use a key.
type Keys struct {
	MKey, SMKey, SAKey uint64
}

// redactedKeys is what a Keys value prints.
const redactedKeys = "opensm.Keys{MKey:(secret), SMKey:(secret), SAKey:(secret)}"

// String returns a redacted form, never the keys.
func (Keys) String() string { return redactedKeys }

// GoString returns a redacted form, never the keys (the %#v verb).
func (Keys) GoString() string { return redactedKeys }

// Format prints the redacted form whatever the verb: without it, verbs fmt
// does not route through String (%d, %x on the fields) would print the keys.
func (Keys) Format(f fmt.State, _ rune) { fmt.Fprint(f, redactedKeys) }

// LogValue keeps the keys out of log records.
func (Keys) LogValue() slog.Value { return slog.StringValue(redactedKeys) }

// MarshalText keeps the keys out of JSON and any other text encoding.
func (Keys) MarshalText() ([]byte, error) { return []byte(redactedKeys), nil }

// wellKnownKeys are values an attacker tries first: 0 turns the protection
// off (M_Key) or means "untrusted" (SA), 1 is OpenSM's default SM_Key and
// SA_Key, and all ones is the other value a careless operator picks.
var wellKnownKeys = []uint64{0, 1, ^uint64(0)}

func wellKnown(k uint64) bool {
	for _, w := range wellKnownKeys {
		if k == w {
			return true
		}
	}
	return false
}

// Check says whether k is fit for a hardened fabric: no key is 0, 1 or all
// ones, and the three keys differ (the SA key in particular must not be the
// SM_Key, which other SMs see). The error names the key, never its value.
func (k Keys) Check() error {
	named := []struct {
		name string
		key  uint64
	}{{"M_Key", k.MKey}, {"SM_Key", k.SMKey}, {"SA_Key", k.SAKey}}
	var errs []error
	for i, a := range named {
		if wellKnown(a.key) {
			errs = append(errs, fmt.Errorf("%s is 0, 1 or 0xffffffffffffffff: a value anyone would try", a.name))
		}
		for _, b := range named[i+1:] {
			if a.key == b.key {
				errs = append(errs, fmt.Errorf("%s and %s are equal: each key must be different", a.name, b.name))
			}
		}
	}
	return errors.Join(errs...)
}

// GenerateKeys returns three random keys from crypto/rand that pass Check.
func GenerateKeys() (Keys, error) {
	for range 10 { // a draw that fails Check has a probability of about 2^-62
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Keys{}, fmt.Errorf("generate OpenSM keys: %w", err)
		}
		k := Keys{
			MKey:  binary.BigEndian.Uint64(b[0:8]),
			SMKey: binary.BigEndian.Uint64(b[8:16]),
			SAKey: binary.BigEndian.Uint64(b[16:24]),
		}
		if k.Check() == nil {
			return k, nil
		}
	}
	return Keys{}, errors.New("generate OpenSM keys: the random source keeps returning unusable values")
}

// FormatKey writes a key as opensm.conf takes it (and as the diagnostic tools'
// -y and --smkey options take it): 0x and 16 hexadecimal digits.
func FormatKey(k uint64) string { return fmt.Sprintf("0x%016x", k) }

// KeySource gives the keys opensm.conf carries. The database keeps them: every
// manager of a fabric, and every restart, must write the same keys, since SMs
// with different SM_Keys ignore each other and a port keeps the M_Key it was
// given until someone who knows it changes it.
type KeySource interface {
	Keys(ctx context.Context) (Keys, error)
}
