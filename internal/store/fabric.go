package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// What the manager records about the fabric besides partitions: OpenSM's keys
// (secrets), the switches an operator confirmed (expected_switches), and the
// switch ports OpenSM stopped enforcing partitions on (enforcement_errors). The
// applier's gates read the last two: no job completes while an enforcement error
// is recorded, or while a confirmed switch is missing from OpenSM's last sweep.

// ExpectedSwitch is a switch an operator confirmed is part of the fabric.
type ExpectedSwitch struct {
	GUID        fabric.GUID // the switch's node GUID
	Description string      // its NodeDescription when it was confirmed
	ConfirmedAt time.Time
}

// Unattributed stands for the switch port of an enforcement error whose log line
// named none: it is the switch column's value, with port 0.
const Unattributed = "unattributed"

// EnforcementSighting is one log line saying OpenSM cleared a switch port's
// partition enforcement.
type EnforcementSighting struct {
	Switch string // the switch's node GUID ("0x" and 16 hex digits), or Unattributed
	Port   int    // the switch port facing the host; 0 when Unattributed
	Line   string // the log line, as OpenSM wrote it
}

// SwitchPort is how operators read an enforcement error's place: "<switch
// GUID>:<port>", or "unattributed".
func (s EnforcementSighting) SwitchPort() string {
	if s.Switch == Unattributed {
		return Unattributed
	}
	return fmt.Sprintf("%s:%d", s.Switch, s.Port)
}

// EnforcementError is a switch port recorded as no longer enforcing partitions.
type EnforcementError struct {
	EnforcementSighting           // Line is the last line seen for that switch port
	FirstSeen           time.Time // when it was first recorded
	LastSeen            time.Time
	Count               int64 // how many lines were recorded for it
}

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

// ConfirmSwitches records switches as the fabric's whole set of switches,
// replacing the previous set in one transaction. Each switch is given once; an
// empty set is refused (a fabric of hosts without a switch has no switch port
// to enforce partitions).
func (s *Store) ConfirmSwitches(ctx context.Context, switches []ExpectedSwitch) error {
	if len(switches) == 0 {
		return errors.New("confirm switches: no switch given: OpenSM has not swept a fabric with switches yet")
	}
	seen := make(map[fabric.GUID]bool, len(switches))
	for _, sw := range switches {
		switch {
		case sw.GUID == 0:
			return fmt.Errorf("confirm switches: switch GUID %s: want a non-zero GUID", sw.GUID)
		case seen[sw.GUID]:
			return fmt.Errorf("confirm switches: switch %s is given twice", sw.GUID)
		case !utf8.ValidString(sw.Description) || len(sw.Description) > 255:
			return fmt.Errorf("confirm switches: switch %s: description %q: want at most 255 bytes of UTF-8",
				sw.GUID, sw.Description)
		}
		seen[sw.GUID] = true
	}
	now := s.now()
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		if err := q.DeleteExpectedSwitches(ctx); err != nil {
			return err
		}
		for _, sw := range switches {
			if err := q.InsertExpectedSwitch(ctx, sw.GUID, sw.Description, now); err != nil {
				return fmt.Errorf("switch %s: %w", sw.GUID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("confirm switches: %w", err)
	}
	return nil
}

// ExpectedSwitches returns the confirmed switches, by GUID.
func (s *Store) ExpectedSwitches(ctx context.Context) ([]ExpectedSwitch, error) {
	return expectedSwitches(ctx, s.d.Queries(ctx))
}

func expectedSwitches(ctx context.Context, q driver.Queries) ([]ExpectedSwitch, error) {
	rows, err := q.ExpectedSwitches(ctx)
	if err != nil {
		return nil, fmt.Errorf("expected switches: %w", err)
	}
	return driver.Convert(rows, func(r driver.ExpectedSwitch) ExpectedSwitch {
		return ExpectedSwitch{GUID: r.Guid, Description: r.Description, ConfirmedAt: r.ConfirmedAt.UTC()}
	}), nil
}

// gateState reads what the gates need of the database, with q: in one query
// (the confirmed switches, each with the count of enforcement errors) while
// no enforcement error is recorded; the errors themselves are read only when
// there are some, or when no switch is confirmed (the count then has no row
// to come in).
func gateState(ctx context.Context, q driver.Queries) (GateState, error) {
	rows, err := q.GateSwitches(ctx)
	if err != nil {
		return GateState{}, fmt.Errorf("expected switches: %w", err)
	}
	st := GateState{Expected: driver.Convert(rows, func(r driver.GateSwitchesRow) ExpectedSwitch {
		return ExpectedSwitch{GUID: r.Guid, Description: r.Description, ConfirmedAt: r.ConfirmedAt.UTC()}
	})}
	if len(rows) > 0 && rows[0].EnforcementErrors == 0 {
		return st, nil
	}
	if st.Errors, err = enforcementErrors(ctx, q); err != nil {
		return GateState{}, err
	}
	return st, nil
}

// RecordEnforcementErrors records what OpenSM's log said, all or nothing. Each
// sighting counts once: the same switch port seen at every sweep keeps one row
// whose count grows.
func (s *Store) RecordEnforcementErrors(ctx context.Context, term int64, seen []EnforcementSighting) error {
	for _, e := range seen {
		if err := checkSighting(e); err != nil {
			return fmt.Errorf("record enforcement errors: %w", err)
		}
	}
	if len(seen) == 0 {
		return nil
	}
	now := s.now()
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, e := range seen {
			line := boundText(e.Line, MaxEnforcementLine)
			n, err := q.UpsertEnforcementError(ctx, driver.UpsertEnforcementErrorParams{SwitchGUID: e.Switch,
				Port: int64(e.Port), Line: line, Now: now, Term: term})
			if err != nil {
				return fmt.Errorf("switch port %s: %w", e.SwitchPort(), err)
			}
			if n == 0 {
				return ErrFenced
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record enforcement errors: %w", err)
	}
	return nil
}

// maxSwitchPort is the highest port number a switch can have (NumPorts is 8 bits,
// port 0 is the switch itself and never faces a host).
const maxSwitchPort = 254

func checkSighting(e EnforcementSighting) error {
	switch {
	case e.Line == "":
		return fmt.Errorf("switch port %s: no log line", e.SwitchPort())
	case e.Switch == Unattributed:
		if e.Port != 0 {
			return fmt.Errorf("unattributed error with port %d: want port 0", e.Port)
		}
		return nil
	}
	g, err := fabric.ParseGUID(e.Switch)
	if err != nil || g.String() != e.Switch || g == 0 {
		return fmt.Errorf("switch %q: want a non-zero GUID as 0x and 16 lower-case hex digits, or %q",
			e.Switch, Unattributed)
	}
	if e.Port < 1 || e.Port > maxSwitchPort {
		return fmt.Errorf("switch %s: port %d: want 1 to %d", e.Switch, e.Port, maxSwitchPort)
	}
	return nil
}

// EnforcementErrors returns the recorded enforcement errors, by switch and port.
func (s *Store) EnforcementErrors(ctx context.Context) ([]EnforcementError, error) {
	return enforcementErrors(ctx, s.d.Queries(ctx))
}

func enforcementErrors(ctx context.Context, q driver.Queries) ([]EnforcementError, error) {
	rows, err := q.EnforcementErrors(ctx)
	if err != nil {
		return nil, fmt.Errorf("enforcement errors: %w", err)
	}
	return driver.Convert(rows, func(r driver.EnforcementError) EnforcementError {
		return EnforcementError{
			EnforcementSighting: EnforcementSighting{Switch: r.SwitchGuid, Port: int(r.Port), Line: r.Line},
			FirstSeen:           r.FirstSeen.UTC(), LastSeen: r.LastSeen.UTC(), Count: r.Occurrences}
	}), nil
}

// ClearEnforcementErrors forgets every recorded enforcement error and says how
// many there were.
func (s *Store) ClearEnforcementErrors(ctx context.Context) (int64, error) {
	n, err := s.d.Queries(ctx).ClearEnforcementErrors(ctx)
	if err != nil {
		return 0, fmt.Errorf("clear enforcement errors: %w", err)
	}
	return n, nil
}

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
			if err := q.InsertSecretIfAbsent(ctx, name, secrets[name], now); err != nil {
				return fmt.Errorf("secret %s: %w", name, err)
			}
		}
		rows, err := q.ListSecrets(ctx)
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
