package opensm

import (
	"context"
	"errors"
	"fmt"
)

// SecretStore is where the keys are kept (store.Store).
type SecretStore interface {
	GetOrCreateSecrets(ctx context.Context, generate func() (map[string]string, error)) (map[string]string, error)
	SecretReader
}

// SecretReader reads the recorded secrets, creating none (store.Store).
type SecretReader interface {
	Secrets(ctx context.Context) (map[string]string, error)
}

// DatabaseKeys is the KeySource of a manager: the keys live in the
// database, created by whichever manager starts first, so every start and
// every replica writes the same keys into opensm.conf.
type DatabaseKeys struct{ Store SecretStore }

// Keys returns the recorded keys, creating them on a new database.
func (d DatabaseKeys) Keys(ctx context.Context) (Keys, error) {
	recorded, err := d.Store.GetOrCreateSecrets(ctx, NewSecrets)
	if err != nil {
		return Keys{}, fmt.Errorf("OpenSM keys: %w", err)
	}
	return KeysOf(recorded)
}

// RecordedKeys is Keys creating none: one read of the secrets, where Keys
// is a write transaction. The reads of the fabric ask for the M_Key at every
// read-back and second-SM look, after the manager's start created the keys.
func (d DatabaseKeys) RecordedKeys(ctx context.Context) (Keys, error) {
	return RecordedKeys(ctx, d.Store)
}

// RecordedKeys returns the keys the database holds, creating none: a command
// that only reads must not choose the fabric's keys before any manager ran.
func RecordedKeys(ctx context.Context, st SecretReader) (Keys, error) {
	recorded, err := st.Secrets(ctx)
	if err != nil {
		return Keys{}, fmt.Errorf("OpenSM keys: %w", err)
	}
	if len(recorded) == 0 {
		return Keys{}, errors.New("no OpenSM keys recorded yet: the manager creates them when it first starts")
	}
	return KeysOf(recorded)
}
