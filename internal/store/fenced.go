package store

import (
	"context"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// writeFenced is the shape of every leader's record of what its term saw: in
// one write transaction, clear (when not nil) deletes the rows the record
// replaces, then write writes the i-th of n rows and says how many it wrote.
// Every query is fenced by the term, so a deposed leader deletes nothing and
// writes nothing: a write of no row is ErrFenced, and the transaction keeps
// nothing of it.
func (s *Store) writeFenced(ctx context.Context, clear func(driver.Queries) error, n int,
	write func(q driver.Queries, i int) (int64, error)) error {
	return s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		if clear != nil {
			if err := clear(q); err != nil {
				return err
			}
		}
		for i := range n {
			wrote, err := write(q, i)
			if err != nil {
				return err
			}
			if wrote == 0 {
				return ErrFenced
			}
		}
		return nil
	})
}
