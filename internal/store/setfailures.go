package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A host port that did not take OpenSM's Sets (internal/applier's
// setfailures.go finds it): only that port's jobs wait or fail, and the
// leader records the port so that the metrics of every manager, leader or
// not, name it, and a new term or a new leader keeps naming it until a sweep
// clears it.

// SetFailure is a host port that did not take OpenSM's Sets.
type SetFailure struct {
	Port  fabric.GUID
	Since time.Time // when the sweeps naming it began
	Term  int64     // the term that recorded it
}

// RecordSetFailures replaces the recorded ports with ports, if term is
// still the current term (ErrFenced otherwise); none clears them.
func (s *Store) RecordSetFailures(ctx context.Context, term int64, ports []SetFailure) error {
	for _, p := range ports {
		if p.Port == 0 || p.Since.IsZero() {
			return fmt.Errorf("record the ports that did not take OpenSM's Sets: port %s since %s: want both", p.Port, p.Since)
		}
	}
	clear := func(q driver.Queries) error {
		_, err := q.DeleteSetFailures(ctx, s.FabricName(), term)
		return err
	}
	err := s.writeFenced(ctx, clear, len(ports), func(q driver.Queries, i int) (int64, error) {
		return q.InsertSetFailure(ctx, ports[i].Port.String(), ports[i].Since.UTC(), term, s.FabricName())
	})
	if err != nil {
		return fmt.Errorf("record the ports that did not take OpenSM's Sets: %w", err)
	}
	return nil
}

// SetFailures returns the recorded ports that did not take OpenSM's Sets, by
// port GUID.
func (s *Store) SetFailures(ctx context.Context) ([]SetFailure, error) {
	rows, err := s.d.Queries(ctx).SetFailures(ctx, s.FabricName())
	if err != nil {
		return nil, fmt.Errorf("read the ports that did not take OpenSM's Sets: %w", err)
	}
	out := make([]SetFailure, 0, len(rows))
	for _, r := range rows {
		guid, err := fabric.ParseGUID(r.PortGuid)
		if err != nil {
			return nil, fmt.Errorf("read the ports that did not take OpenSM's Sets: port %q: %w", r.PortGuid, err)
		}
		out = append(out, SetFailure{Port: guid, Since: r.Since.UTC(), Term: r.Term})
	}
	return out, nil
}
