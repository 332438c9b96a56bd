package fabric

import (
	"database/sql/driver"
	"fmt"
)

// How a GUID and a pkey sit in the database, on every engine: a GUID is a text
// column holding its canonical form, a pkey an integer column. The generated
// queries (db/) read and write these types directly (sqlc's overrides), so no
// engine converts them by hand. A nullable column is a pointer: nil is NULL.

// Value writes the canonical text form.
func (g GUID) Value() (driver.Value, error) { return g.String(), nil }

// Scan reads a GUID column.
func (g *GUID) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("GUID column: want text, got %T", src)
	}
	parsed, err := ParseGUID(s)
	if err != nil {
		return err
	}
	*g = parsed
	return nil
}

// Value writes the pkey as an integer.
func (p PKey) Value() (driver.Value, error) { return int64(p), nil }

// Scan reads a pkey column.
func (p *PKey) Scan(src any) error {
	var v int64
	switch x := src.(type) {
	case int64:
		v = x
	case int32:
		v = int64(x)
	case []byte:
		if _, err := fmt.Sscan(string(x), &v); err != nil {
			return fmt.Errorf("pkey column %q: %w", x, err)
		}
	default:
		return fmt.Errorf("pkey column: want an integer, got %T", src)
	}
	if v < 0 || v > 0xffff {
		return fmt.Errorf("pkey column: %d is out of range", v)
	}
	*p = PKey(v)
	return nil
}
