package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A duplicated GUID: OpenSM found one GUID twice on the fabric (a host that
// cloned another host's GUIDs). The leader records what OpenSM's log said so
// that --status, which runs in another process, a new leader and the
// metrics of every manager name it; no job completes while one is recorded
// (internal/applier's gate duplicate_guid).

// DuplicateSighting is what OpenSM's log said of a GUID since the last record.
type DuplicateSighting struct {
	GUID   string   // "0x" and 16 lower-case hex digits, or "unknown" (an entry without its details)
	Kind   string   // "node" or "port"
	Places []string // the switch ports it was seen behind, "<switch GUID>:<port>"
	Line   string   // the last entry, as OpenSM wrote it
	Count  int64    // how many entries
}

// DuplicateGUID is a GUID recorded as found twice.
type DuplicateGUID struct {
	DuplicateSighting // Line, Places and Kind the last seen; Count all recorded
	FirstSeen         time.Time
	LastSeen          time.Time
}

// UnknownGUID is the GUID of a duplicate whose entry did not name it.
const UnknownGUID = "unknown"

// maxPlaces bounds the switch ports a duplicate names (ERR 0D01 names two).
const maxPlaces = 4

func checkDuplicate(d DuplicateSighting) error {
	if d.GUID != UnknownGUID {
		g, err := fabric.ParseGUID(d.GUID)
		if err != nil || g.String() != d.GUID || g == 0 {
			return fmt.Errorf("GUID %q: want a non-zero GUID as 0x and 16 lower-case hex digits, or %q", d.GUID, UnknownGUID)
		}
	}
	switch {
	case d.Kind != "node" && d.Kind != "port":
		return fmt.Errorf("GUID %s: kind %q: want node or port", d.GUID, d.Kind)
	case d.Line == "" || d.Count < 1:
		return fmt.Errorf("GUID %s: want a log line and a count of at least 1", d.GUID)
	case len(d.Places) > maxPlaces:
		return fmt.Errorf("GUID %s: %d places: want at most %d", d.GUID, len(d.Places), maxPlaces)
	}
	for _, p := range d.Places {
		sw, port, ok := strings.Cut(p, ":")
		g, err := fabric.ParseGUID(sw)
		if !ok || err != nil || g.String() != sw || port == "" || len(port) > 3 || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("GUID %s: place %q: want <switch GUID>:<port>", d.GUID, p)
		}
	}
	return nil
}

// RecordDuplicateGUIDs records what OpenSM's log said, all or nothing, if
// term is still the current term (ErrFenced otherwise). A GUID seen again
// keeps one row whose count grows.
func (s *Store) RecordDuplicateGUIDs(ctx context.Context, term int64, seen []DuplicateSighting) error {
	for _, d := range seen {
		if err := checkDuplicate(d); err != nil {
			return fmt.Errorf("record duplicated GUIDs: %w", err)
		}
	}
	if len(seen) == 0 {
		return nil
	}
	now := s.now()
	err := s.writeFenced(ctx, nil, len(seen), func(q driver.Queries, i int) (int64, error) {
		d := seen[i]
		n, err := q.UpsertDuplicateGUID(ctx, driver.UpsertDuplicateGUIDParams{Fabric: s.FabricName(), GUID: d.GUID,
			Kind: d.Kind, Places: strings.Join(d.Places, " "), Line: logLine(d.Line),
			Now: now, Occurrences: d.Count, Term: term})
		if err != nil {
			return 0, fmt.Errorf("GUID %s: %w", d.GUID, err)
		}
		return n, nil
	})
	if err != nil {
		return fmt.Errorf("record duplicated GUIDs: %w", err)
	}
	return nil
}

// ClearDuplicateGUIDs forgets the recorded duplicates, once OpenSM swept
// without one, if term is still the current term, and says how many it
// forgot (0 too when fenced).
func (s *Store) ClearDuplicateGUIDs(ctx context.Context, term int64) (int64, error) {
	n, err := s.d.Queries(ctx).DeleteDuplicateGUIDs(ctx, s.FabricName(), term)
	if err != nil {
		return 0, fmt.Errorf("clear duplicated GUIDs: %w", err)
	}
	return n, nil
}

// DuplicateGUIDs returns the recorded duplicates, by GUID.
func (s *Store) DuplicateGUIDs(ctx context.Context) ([]DuplicateGUID, error) {
	return readRows(ctx, "duplicated GUIDs", s.FabricName(), s.d.Queries(ctx).DuplicateGUIDs,
		func(r driver.DuplicateGUID) DuplicateGUID {
			var places []string
			if r.Places != "" {
				places = strings.Split(r.Places, " ")
			}
			return DuplicateGUID{DuplicateSighting: DuplicateSighting{GUID: r.Guid, Kind: r.Kind, Places: places,
				Line: r.Line, Count: r.Occurrences}, FirstSeen: r.FirstSeen.UTC(), LastSeen: r.LastSeen.UTC()}
		})
}
