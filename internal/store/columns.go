package store

import (
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// How domain values sit in the tables, shared by every engine: a pkey is a
// nullable integer (NULL for a flat network), a GUID a nullable text column in
// its canonical form (NULL when the port holds no membership).

// PKeyColumn is the column value of a network's pkey.
func PKeyColumn[T int32 | int64](p *fabric.PKey) *T {
	if p == nil {
		return nil
	}
	v := T(*p)
	return &v
}

// PKeyFromColumn reads a network's pkey column.
func PKeyFromColumn[T int32 | int64](v *T) *fabric.PKey {
	if v == nil {
		return nil
	}
	p := fabric.PKey(*v)
	return &p
}

// GUIDColumn is the column value of a port's GUID.
func GUIDColumn(g *fabric.GUID) *string {
	if g == nil {
		return nil
	}
	s := g.String()
	return &s
}

// GUIDFromColumn reads the GUID column of port portID.
func GUIDFromColumn(portID string, s *string) (*fabric.GUID, error) {
	if s == nil {
		return nil, nil
	}
	g, err := fabric.ParseGUID(*s)
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", portID, err)
	}
	return &g, nil
}

// MemberFromColumns reads one row of the membership listing.
func MemberFromColumns(networkID string, guid *string) (Member, error) {
	if guid == nil {
		return Member{}, fmt.Errorf("network %s: membership row without a GUID", networkID)
	}
	g, err := fabric.ParseGUID(*guid)
	if err != nil {
		return Member{}, fmt.Errorf("network %s: %w", networkID, err)
	}
	return Member{NetworkID: networkID, GUID: g}, nil
}

// ConvertRows turns the rows an engine's query returned into the store's type,
// with conv, the engine's conversion of one row.
func ConvertRows[R, T any](rows []R, conv func(R) (T, error)) ([]T, error) {
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		v, err := conv(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
