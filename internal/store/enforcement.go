package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// What the manager records about pkey enforcement: the switches an operator
// confirmed (expected_switches), and the switch ports OpenSM stopped enforcing
// partitions on (enforcement_errors). The applier's gates read both: no job
// completes while an enforcement error is recorded, or while a confirmed
// switch is missing from OpenSM's last sweep.

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
		if err := q.DeleteExpectedSwitches(ctx, s.FabricName()); err != nil {
			return err
		}
		for _, sw := range switches {
			if err := q.InsertExpectedSwitch(ctx, s.FabricName(), sw.GUID, sw.Description, now); err != nil {
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
	return readRows(ctx, "expected switches", s.FabricName(), s.d.Queries(ctx).ExpectedSwitches,
		func(r driver.ExpectedSwitch) ExpectedSwitch {
			return ExpectedSwitch{GUID: r.Guid, Description: r.Description, ConfirmedAt: r.ConfirmedAt.UTC()}
		})
}

// readRows reads rows with read and converts each with conv; what names the
// rows in read's error.
func readRows[R, T any](ctx context.Context, what, fab string, read func(context.Context, string) ([]R, error), conv func(R) T) ([]T, error) {
	rows, err := read(ctx, fab)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return driver.Convert(rows, conv), nil
}

// gateState reads what the gates need of the database, with q: in one query
// (the confirmed switches, each with the count of enforcement errors) while
// no enforcement error is recorded; the errors themselves are read only when
// there are some, or when no switch is confirmed (the count then has no row
// to come in).
func gateState(ctx context.Context, fab string, q driver.Queries) (GateState, error) {
	rows, err := q.GateSwitches(ctx, fab)
	if err != nil {
		return GateState{}, fmt.Errorf("expected switches: %w", err)
	}
	st := GateState{Expected: driver.Convert(rows, func(r driver.GateSwitchesRow) ExpectedSwitch {
		return ExpectedSwitch{GUID: r.Guid, Description: r.Description, ConfirmedAt: r.ConfirmedAt.UTC()}
	})}
	if len(rows) > 0 && rows[0].EnforcementErrors == 0 {
		return st, nil
	}
	if st.Errors, err = enforcementErrors(ctx, fab, q); err != nil {
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
	err := s.writeFenced(ctx, nil, len(seen), func(q driver.Queries, i int) (int64, error) {
		e := seen[i]
		n, err := q.UpsertEnforcementError(ctx, driver.UpsertEnforcementErrorParams{Fabric: s.FabricName(), SwitchGUID: e.Switch,
			Port: int64(e.Port), Line: logLine(e.Line), Now: now, Term: term})
		if err != nil {
			return 0, fmt.Errorf("switch port %s: %w", e.SwitchPort(), err)
		}
		return n, nil
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
	return enforcementErrors(ctx, s.FabricName(), s.d.Queries(ctx))
}

func enforcementErrors(ctx context.Context, fab string, q driver.Queries) ([]EnforcementError, error) {
	return readRows(ctx, "enforcement errors", fab, q.EnforcementErrors, func(r driver.EnforcementError) EnforcementError {
		return EnforcementError{
			EnforcementSighting: EnforcementSighting{Switch: r.SwitchGuid, Port: int(r.Port), Line: r.Line},
			FirstSeen:           r.FirstSeen.UTC(), LastSeen: r.LastSeen.UTC(), Count: r.Occurrences}
	})
}

// ClearEnforcementErrors forgets every recorded enforcement error and says how
// many there were.
func (s *Store) ClearEnforcementErrors(ctx context.Context) (int64, error) {
	n, err := s.d.Queries(ctx).ClearEnforcementErrors(ctx, s.FabricName())
	if err != nil {
		return 0, fmt.Errorf("clear enforcement errors: %w", err)
	}
	return n, nil
}
