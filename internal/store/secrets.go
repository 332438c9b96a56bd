package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// OpenSM's keys (secrets): created once, by whichever manager comes first, and
// never quoted by an error.

// GetOrCreateSecrets returns OpenSM's keys, creating them the first time. generate
// makes a fresh set (name -> value); whichever manager inserts a name first wins,
// and every caller gets the values the database holds, so replicas starting
// together agree. generate runs at every call (it should be cheap, such as random
// numbers); a name it adds later, in a newer version, is created then. The result
// holds every recorded secret.
//
// Names are lower-case words (letters, digits, '_'); values are 1 to 255
// printable ASCII characters. No error ever quotes a value.
func (s *Store) GetOrCreateSecrets(ctx context.Context, generate func() (map[string]string, error)) (map[string]string, error) {
	fresh, err := generate()
	if err != nil {
		return nil, fmt.Errorf("generate secrets: %w", err)
	}
	if len(fresh) == 0 {
		return nil, errors.New("generate secrets: no secret generated")
	}
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		if err := checkSecret(name, fresh[name]); err != nil {
			return nil, err
		}
	}
	got, err := s.insertSecretsIfAbsent(ctx, fresh)
	if err != nil {
		return nil, fmt.Errorf("store secrets: %w", scrub(err, fresh))
	}
	return got, nil
}

// Secrets returns the recorded secrets, creating none: empty before the first
// manager's start.
func (s *Store) Secrets(ctx context.Context) (map[string]string, error) {
	rows, err := s.d.Queries(ctx).ListSecrets(ctx, s.FabricName())
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Value
	}
	return out, nil
}

var secretName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func checkSecret(name, value string) error {
	if !secretName.MatchString(name) {
		return fmt.Errorf("secret name %q: want a lower-case letter, then up to 63 letters, digits or '_'", name)
	}
	if len(value) == 0 || len(value) > 255 {
		return fmt.Errorf("secret %s: value of %d characters: want 1 to 255", name, len(value))
	}
	for _, r := range value {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("secret %s: value has a character that is not printable ASCII (value not shown)", name)
		}
	}
	return nil
}

// scrub returns err with every secret value replaced: a driver may quote the
// data of a failed statement in its error, and errors end up in logs.
func scrub(err error, secrets map[string]string) error {
	msg := err.Error()
	for _, v := range secrets {
		msg = strings.ReplaceAll(msg, v, "(not shown)")
	}
	return &scrubbedError{msg: msg, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

// Unwrap keeps errors.Is working (context errors, for instance); print the
// scrubbed error, not what it wraps.
func (e *scrubbedError) Unwrap() error { return e.err }

// insertSecretsIfAbsent inserts, in one transaction, each secret whose name is
// not recorded yet, and returns every recorded secret, read in the same
// transaction. The names go in one order: two managers inserting the same
// names cannot deadlock on each other's rows. An insert that meets another
// transaction's uncommitted row of the same name waits for it, and the read
// after the inserts sees the winner's value (PostgreSQL's READ COMMITTED
// takes a snapshot per statement; InnoDB's REPEATABLE READ takes its snapshot
// at the first plain read, which comes after the inserts; SQLite has one
// writer at a time).
func (s *Store) insertSecretsIfAbsent(ctx context.Context, secrets map[string]string) (map[string]string, error) {
	now := s.now()
	out := map[string]string{}
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, name := range slices.Sorted(maps.Keys(secrets)) {
			if err := q.InsertSecretIfAbsent(ctx, s.FabricName(), name, secrets[name], now); err != nil {
				return fmt.Errorf("secret %s: %w", name, err)
			}
		}
		rows, err := q.ListSecrets(ctx, s.FabricName())
		for _, r := range rows {
			out[r.Name] = r.Value
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ErrSecretsDiffer is what SetSecrets returns, wrapped with the names, when
// it was not told to replace and a name already holds another value.
var ErrSecretsDiffer = errors.New("already recorded with another value")

// SetSecrets records values (name -> value) in one transaction: all of them
// or, on any error, none. A name not yet recorded is inserted. A name recorded
// with another value is replaced only with replace set (a rotation, or an
// import over keys a manager already created); otherwise nothing is written
// and the error wraps ErrSecretsDiffer and names the names, never a value.
// The result holds every recorded secret after the change.
//
// The inserts come first, as in GetOrCreateSecrets, so the read after them sees
// a concurrent caller's committed rows on every engine: an import racing a
// manager that creates keys on its first start is refused rather than
// silently overwritten, or overwriting.
func (s *Store) SetSecrets(ctx context.Context, values map[string]string, replace bool) (map[string]string, error) {
	if len(values) == 0 {
		return nil, errors.New("set secrets: no secret given")
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if err := checkSecret(name, values[name]); err != nil {
			return nil, err
		}
	}
	now := s.now()
	out := map[string]string{}
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		names := slices.Sorted(maps.Keys(values))
		for _, name := range names {
			if err := q.InsertSecretIfAbsent(ctx, s.FabricName(), name, values[name], now); err != nil {
				return fmt.Errorf("secret %s: %w", name, err)
			}
		}
		rows, err := q.ListSecrets(ctx, s.FabricName())
		if err != nil {
			return err
		}
		for _, r := range rows {
			out[r.Name] = r.Value
		}
		var differ []string
		for _, name := range names {
			if out[name] != values[name] {
				differ = append(differ, name)
			}
		}
		if len(differ) > 0 && !replace {
			return fmt.Errorf("secrets %s: %w", strings.Join(differ, ", "), ErrSecretsDiffer)
		}
		for _, name := range differ {
			if err := q.UpdateSecret(ctx, s.FabricName(), values[name], name); err != nil {
				return fmt.Errorf("secret %s: %w", name, err)
			}
			out[name] = values[name]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set secrets: %w", scrub(err, values))
	}
	return out, nil
}
