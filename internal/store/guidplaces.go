package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A GUID's place: the switch port a host port GUID of the partitions was
// first seen behind in OpenSM's subnet dump, or where an operator accepted it.
// A host that takes another's GUID while that host is down makes no
// duplicate OpenSM could see: the GUID just appears behind another switch
// port, and the partitions of the host it cloned follow it there. The leader
// records each GUID's place and, at each sweep, where a recorded GUID was
// seen instead (internal/applier's moved.go); the gate duplicate_guid names
// it.

// GUIDPlace is a GUID's recorded switch port.
type GUIDPlace struct {
	GUID       fabric.GUID
	Switch     fabric.GUID // the switch's node GUID
	Port       int         // the switch's port facing the GUID's host
	RecordedAt time.Time
	// MovedTo is the switch port ("<switch GUID>:<port>") the GUID was last
	// seen behind instead of its own; "" while it has not been since it was
	// recorded, or since it was seen back at its own.
	MovedTo string
	MovedAt time.Time // when MovedTo was last set
}

// SwitchPort is the place as operators list switch ports: "<switch GUID>:<port>".
func (p GUIDPlace) SwitchPort() string { return fmt.Sprintf("%s:%d", p.Switch, p.Port) }

// GUIDPlaceUpdate is what the leader saw of a GUID at a sweep: its first
// place (New), or, for a GUID recorded behind Switch:Port, the switch port it
// was seen behind instead (MovedTo; "" when it was seen back there).
type GUIDPlaceUpdate struct {
	GUID    fabric.GUID
	Switch  fabric.GUID
	Port    int
	New     bool
	MovedTo string
}

func checkPlace(guid, sw fabric.GUID, port int) error {
	if guid == 0 || sw == 0 || port < 1 || port > maxSwitchPort {
		return fmt.Errorf("GUID %s behind %s:%d: want non-zero GUIDs and a port from 1 to %d", guid, sw, port, maxSwitchPort)
	}
	return nil
}

// RecordGUIDPlaces writes what the leader saw, if term is still the current
// term, and returns the places recorded then, read in the same transaction.
// A deposed leader writes nothing (each statement is fenced) and reads what
// the leader recorded. A GUID already recorded keeps its place: a first
// place never overwrites one (an operator's accept made meanwhile wins), and
// a move is marked only while the row still has the place it was compared
// with.
func (s *Store) RecordGUIDPlaces(ctx context.Context, term int64, seen []GUIDPlaceUpdate) ([]GUIDPlace, error) {
	for _, u := range seen {
		if err := checkPlace(u.GUID, u.Switch, u.Port); err != nil {
			return nil, fmt.Errorf("record GUIDs' switch ports: %w", err)
		}
	}
	now := s.now()
	var places []GUIDPlace
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, u := range seen {
			var err error
			if u.New {
				_, err = q.InsertGUIDPlace(ctx, driver.InsertGUIDPlaceParams{Fabric: s.FabricName(), GUID: u.GUID,
					SwitchGUID: u.Switch, SwitchPort: int64(u.Port), Now: now, Term: term})
			} else {
				_, err = q.MarkGUIDMoved(ctx, driver.MarkGUIDMovedParams{MovedTo: u.MovedTo, Now: now, Fabric: s.FabricName(),
					GUID: u.GUID, SwitchGUID: u.Switch, SwitchPort: int64(u.Port), Term: term})
			}
			if err != nil {
				return fmt.Errorf("GUID %s: %w", u.GUID, err)
			}
		}
		var err error
		places, err = guidPlaces(ctx, s.FabricName(), q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record GUIDs' switch ports: %w", err)
	}
	return places, nil
}

// AddGUIDPlaces records first places only (every update New), if term is
// still the current term, and reads nothing back: the common sweep, where a
// change brought a host port not yet recorded, costs one small write, not a
// read of every recorded place. It returns how many were recorded: fewer than
// given when a deposed leader wrote nothing, or a GUID already had a place
// (an operator's accept made meanwhile), and the caller then reads them all.
func (s *Store) AddGUIDPlaces(ctx context.Context, term int64, news []GUIDPlaceUpdate) (int64, error) {
	for _, u := range news {
		if !u.New {
			return 0, fmt.Errorf("record GUIDs' first switch ports: GUID %s is not a first place", u.GUID)
		}
		if err := checkPlace(u.GUID, u.Switch, u.Port); err != nil {
			return 0, fmt.Errorf("record GUIDs' first switch ports: %w", err)
		}
	}
	now := s.now()
	var added, held int64
	// The inserts are held, their counts given when sent (driver.CountInto),
	// to go with the BEGIN and the COMMIT: on PostgreSQL and MariaDB one
	// round trip where there were three, beside the read-back of every
	// change that brings a host. Nothing is decided on a count before the
	// COMMIT: a failed insert fails it, and nothing is recorded.
	err := s.d.InChangeTx(ctx, func(q driver.ChangeTx) error {
		added, held = 0, 0
		for _, u := range news {
			n, err := q.Later().InsertGUIDPlace(driver.CountInto(ctx, &held), driver.InsertGUIDPlaceParams{
				Fabric: s.FabricName(), GUID: u.GUID, SwitchGUID: u.Switch, SwitchPort: int64(u.Port), Now: now, Term: term})
			if err != nil {
				return fmt.Errorf("GUID %s: %w", u.GUID, err)
			}
			added += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record GUIDs' first switch ports: %w", err)
	}
	return added + held, nil
}

// GUIDPlaces returns the recorded places, by GUID.
func (s *Store) GUIDPlaces(ctx context.Context) ([]GUIDPlace, error) {
	places, err := guidPlaces(ctx, s.FabricName(), s.d.Queries(ctx))
	if err != nil {
		return nil, fmt.Errorf("read GUIDs' switch ports: %w", err)
	}
	return places, nil
}

func guidPlaces(ctx context.Context, fab string, q driver.Queries) ([]GUIDPlace, error) {
	rows, err := q.GUIDPlaces(ctx, fab)
	if err != nil {
		return nil, err
	}
	return driver.Convert(rows, func(r driver.GUIDPlace) GUIDPlace {
		return GUIDPlace{GUID: r.Guid, Switch: r.SwitchGuid, Port: int(r.SwitchPort), RecordedAt: r.RecordedAt.UTC(),
			MovedTo: r.MovedTo, MovedAt: r.MovedAt.UTC()}
	}), nil
}

// AcceptGUIDPlaces records each GUID's place as the switch port given, a move
// an operator checked (a host recabled, an HCA moved to another host): not
// fenced, as --confirm-switches. All or nothing.
func (s *Store) AcceptGUIDPlaces(ctx context.Context, places []GUIDPlace) error {
	for _, p := range places {
		if err := checkPlace(p.GUID, p.Switch, p.Port); err != nil {
			return fmt.Errorf("accept GUIDs' switch ports: %w", err)
		}
	}
	now := s.now()
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, p := range places {
			if err := q.AcceptGUIDPlace(ctx, driver.GUIDPlaceParams{Fabric: s.FabricName(), GUID: p.GUID,
				SwitchGUID: p.Switch, SwitchPort: int64(p.Port), Now: now}); err != nil {
				return fmt.Errorf("GUID %s: %w", p.GUID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("accept GUIDs' switch ports: %w", err)
	}
	return nil
}

// ForgetGUIDPlaces deletes the recorded places of guids, GUIDs an operator
// knows gone from the fabric for good (a host decommissioned while its GUID
// was marked moved): each is recorded again where it next appears. It says
// how many were recorded. All or nothing.
func (s *Store) ForgetGUIDPlaces(ctx context.Context, guids []fabric.GUID) (int64, error) {
	var n int64
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, g := range guids {
			d, err := q.DeleteGUIDPlace(ctx, s.FabricName(), g)
			if err != nil {
				return fmt.Errorf("GUID %s: %w", g, err)
			}
			n += d
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("forget GUIDs' switch ports: %w", err)
	}
	return n, nil
}
