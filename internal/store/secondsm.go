package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A second subnet manager: a master SM on the fabric that is not the
// leader's own OpenSM (internal/applier's secondsm.go finds it). The leader
// records it so that --status, which runs in another process, and the
// metrics of every manager name it; no job completes while one is recorded.

// SecondSM is a master subnet manager that is not the leader's own OpenSM.
type SecondSM struct {
	PortGUID fabric.GUID // the port it runs on
	Priority int         // its SMInfo priority, 0 to 15
	State    string      // its SMInfo state (MASTER, or the state it was in)
	OwnState string      // the state of the leader's own OpenSM then
	Term     int64       // the term that recorded it
	SeenAt   time.Time
}

// Bounds of a recorded second SM's fields.
const (
	maxSMPriority = 15
	maxSMState    = 16 // bytes, the columns' size
)

// checkSecondSM refuses what the columns cannot hold.
func checkSecondSM(sm SecondSM) error {
	switch {
	case sm.PortGUID == 0:
		return fmt.Errorf("want a non-zero port GUID")
	case sm.Priority < 0 || sm.Priority > maxSMPriority:
		return fmt.Errorf("%s: priority %d: want 0 to %d", sm.PortGUID, sm.Priority, maxSMPriority)
	case sm.State == "" || len(sm.State) > maxSMState || len(sm.OwnState) > maxSMState:
		return fmt.Errorf("%s: states %q and %q: want 1 to %d bytes (own: 0 to %d)",
			sm.PortGUID, sm.State, sm.OwnState, maxSMState, maxSMState)
	}
	return nil
}

// row is sm as the recorded second or foreign SM of fabric, seen by term.
func (sm SecondSM) row(fabric string, term int64, now time.Time) driver.InsertSecondSMParams {
	return driver.InsertSecondSMParams{Fabric: fabric, PortGUID: sm.PortGUID.String(),
		Priority: int64(sm.Priority), State: sm.State, OwnState: sm.OwnState, Term: term, Now: now}
}

// RecordSecondSM records sm as the one second SM, replacing any recorded
// before, if term is still the current term (ErrFenced otherwise).
func (s *Store) RecordSecondSM(ctx context.Context, term int64, sm SecondSM) error {
	if err := checkSecondSM(sm); err != nil {
		return fmt.Errorf("record second subnet manager: %w", err)
	}
	now := s.now()
	clear := func(q driver.Queries) error {
		_, err := q.DeleteSecondSMs(ctx, s.FabricName(), term)
		return err
	}
	err := s.writeFenced(ctx, clear, 1, func(q driver.Queries, _ int) (int64, error) {
		return q.InsertSecondSM(ctx, sm.row(s.FabricName(), term, now))
	})
	if err != nil {
		return fmt.Errorf("record second subnet manager %s: %w", sm.PortGUID, err)
	}
	return nil
}

// ClearSecondSMs forgets the recorded second SM, once the leader's own
// OpenSM is master again, if term is still the current term, and says how
// many it forgot (0 too when fenced).
func (s *Store) ClearSecondSMs(ctx context.Context, term int64) (int64, error) {
	n, err := s.d.Queries(ctx).DeleteSecondSMs(ctx, s.FabricName(), term)
	if err != nil {
		return 0, fmt.Errorf("clear second subnet managers: %w", err)
	}
	return n, nil
}

// SecondSMs returns the recorded second SMs (at most one), by port GUID.
func (s *Store) SecondSMs(ctx context.Context) ([]SecondSM, error) {
	rows, err := s.d.Queries(ctx).SecondSMs(ctx, s.FabricName())
	if err != nil {
		return nil, fmt.Errorf("read second subnet managers: %w", err)
	}
	return secondSMRows(rows, "second subnet managers")
}

// A foreign subnet manager: MASTER by its own SMInfo but master of no port
// the leader reads (a tenant's OpenSM on its own host, which the SM_Key and
// the M_Keys keep off the ports). It holds no job; the leader records the
// ones its last look saw for --status, the metrics and the alert.

// RecordForeignSMs replaces the recorded foreign SMs with sms, if term is
// still the current term (ErrFenced otherwise); none clears them.
func (s *Store) RecordForeignSMs(ctx context.Context, term int64, sms []SecondSM) error {
	for _, sm := range sms {
		if err := checkSecondSM(sm); err != nil {
			return fmt.Errorf("record foreign subnet managers: %w", err)
		}
	}
	now := s.now()
	clear := func(q driver.Queries) error {
		_, err := q.DeleteForeignSMs(ctx, s.FabricName(), term)
		return err
	}
	err := s.writeFenced(ctx, clear, len(sms), func(q driver.Queries, i int) (int64, error) {
		return q.InsertForeignSM(ctx, sms[i].row(s.FabricName(), term, now))
	})
	if err != nil {
		return fmt.Errorf("record foreign subnet managers: %w", err)
	}
	return nil
}

// ForeignSMs returns the recorded foreign SMs, by port GUID.
func (s *Store) ForeignSMs(ctx context.Context) ([]SecondSM, error) {
	rows, err := s.d.Queries(ctx).ForeignSMs(ctx, s.FabricName())
	if err != nil {
		return nil, fmt.Errorf("read foreign subnet managers: %w", err)
	}
	return secondSMRows(rows, "foreign subnet managers")
}

func secondSMRows(rows []driver.SecondSubnetManager, what string) ([]SecondSM, error) {
	sms := make([]SecondSM, 0, len(rows))
	for _, r := range rows {
		guid, err := fabric.ParseGUID(r.PortGuid)
		if err != nil {
			return nil, fmt.Errorf("read %s: port %q: %w", what, r.PortGuid, err)
		}
		sms = append(sms, SecondSM{PortGUID: guid, Priority: int(r.Priority), State: r.State, OwnState: r.OwnState,
			Term: r.Term, SeenAt: r.SeenAt.UTC()})
	}
	return sms, nil
}
