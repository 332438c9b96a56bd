package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// The HA lease ([ha] ha = true): leadership is the leadership row's lease, a
// holder, a term and an expiry, all on the database's clock. A manager takes
// it by compare-and-set when it is free (released, or never held) or expired,
// and renews it while it leads; the term it took fences every applier write
// (the queries condition on leadership.term). An advisory lock cannot do this
// on Galera, which does not replicate GET_LOCK; a row does replicate, and two
// nodes' conflicting takes certify in order, the loser's commit failing.
//
// The freeze is on the same row: a leader whose OpenSM found another master
// completes nothing until an operator has checked the suspect (the previous
// holder, whose OpenSM may still be master) and asked for --unfreeze.

// Lease is the leadership row as the HA lease reads it.
type Lease struct {
	Term      int64
	Holder    string     // who took the term; it holds the lease while Held
	Heartbeat *time.Time // the holder's last take or renewal
	ExpiresAt *time.Time // nil: released (or never taken)
	Now       time.Time  // the database's clock when the row was read
	// PreviousHolder held the term before; PreviousExpired says its lease
	// expired instead of being released (a manager killed, hung or cut off).
	PreviousHolder  string
	PreviousExpired bool
	// Suspect is the manager whose OpenSM may still be master: the holder
	// before a lease that expired, kept until a freeze is lifted.
	Suspect string
	// Freeze says why no job completes ("" when none), UnfreezeRequested that
	// an operator has run --unfreeze and the leader has not taken it yet.
	Freeze            string
	UnfreezeRequested bool
}

// Held says whether the lease is held: taken and not expired.
func (l Lease) Held() bool { return l.ExpiresAt != nil && !l.ExpiresAt.Before(l.Now) }

// LeaseTables is what the HA lease does (on PostgreSQL and MariaDB). Every
// write but TakeLease and RequestUnfreeze is fenced by term.
type LeaseTables interface {
	// TakeLease starts a new term for holder, valid for ttl, if the lease is
	// free or expired; false (and the row as it is) otherwise.
	TakeLease(ctx context.Context, holder string, ttl time.Duration) (Lease, bool, error)
	// RenewLease extends term's lease to ttl from now if it has not expired.
	RenewLease(ctx context.Context, term int64, ttl time.Duration) (bool, error)
	// ReleaseLease gives term's lease up, so that another manager can take it
	// without waiting for it to expire.
	ReleaseLease(ctx context.Context, term int64) (bool, error)
	ReadLease(ctx context.Context) (Lease, error)
	SetFreeze(ctx context.Context, term int64, reason string) (bool, error)
	// RequestUnfreeze records an operator's --unfreeze if there is a freeze.
	RequestUnfreeze(ctx context.Context) (int64, error)
	// LiftFreeze lifts term's freeze if an unfreeze was requested.
	LiftFreeze(ctx context.Context, term int64) (bool, error)
}

// ErrFenced is a write of the applier refused because its term is no longer
// the current one: another manager leads.
var ErrFenced = errors.New("a newer leadership term has started")

// ErrLockNotClusterWide is TryLock's error where the advisory lock is not
// exclusive across the database (a Galera node's GET_LOCK): the lease alone
// elects there.
var ErrLockNotClusterWide = driver.ErrLockNotClusterWide

// ErrNoLease is returned for an engine without the HA lease (SQLite).
var ErrNoLease = errors.New("[ha] ha = true needs PostgreSQL or MariaDB (SQLite serves one manager)")

// Leases returns the HA lease, or ErrNoLease for an engine without one.
func (s *Store) Leases() (LeaseTables, error) {
	if _, ok := s.d.Queries(context.Background()).(driver.LeaseQueries); !ok {
		return nil, ErrNoLease
	}
	return leases{s.d, s.FabricName()}, nil
}

// leases is the HA lease over an engine's lease queries: every rule of it is
// here, the engines only run the SQL.
type leases struct {
	d      driver.Driver
	fabric string // whose leadership row
}

func (l leases) queries(ctx context.Context) driver.LeaseQueries {
	return l.d.Queries(ctx).(driver.LeaseQueries)
}

// TakeLease takes the row and reads it back in one transaction, so that the
// row returned is the one the take left. On Galera, two nodes' takes of the
// row certify in order: the loser's commit fails (a deadlock error), and it
// has not taken the lease.
func (l leases) TakeLease(ctx context.Context, holder string, ttl time.Duration) (Lease, bool, error) {
	var (
		taken int64
		row   driver.ReadLeaseRow
		read  bool // both ran: an error after them is the commit's
	)
	err := l.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		lq := q.(driver.LeaseQueries)
		var err error
		if taken, err = lq.TakeLease(ctx, l.fabric, holder, ttl); err != nil {
			return fmt.Errorf("take lease: %w", err)
		}
		if row, err = lq.ReadLease(ctx, l.fabric); err != nil {
			return fmt.Errorf("read lease: %w", err)
		}
		read = true
		return nil
	})
	if err != nil {
		if read {
			err = fmt.Errorf("take lease: commit: %w", err)
		}
		return Lease{}, false, err
	}
	return lease(row), taken == 1, nil
}

func (l leases) RenewLease(ctx context.Context, term int64, ttl time.Duration) (bool, error) {
	n, err := l.queries(ctx).RenewLease(ctx, l.fabric, ttl, term)
	return n == 1, err
}

func (l leases) ReleaseLease(ctx context.Context, term int64) (bool, error) {
	n, err := l.queries(ctx).ReleaseLease(ctx, l.fabric, term)
	return n == 1, err
}

func (l leases) ReadLease(ctx context.Context) (Lease, error) {
	row, err := l.queries(ctx).ReadLease(ctx, l.fabric)
	if err != nil {
		return Lease{}, err
	}
	return lease(row), nil
}

func (l leases) SetFreeze(ctx context.Context, term int64, reason string) (bool, error) {
	n, err := l.queries(ctx).SetFreeze(ctx, l.fabric, FreezeReason(reason), term)
	return n == 1, err
}

func (l leases) RequestUnfreeze(ctx context.Context) (int64, error) {
	return l.queries(ctx).RequestUnfreeze(ctx, l.fabric)
}

func (l leases) LiftFreeze(ctx context.Context, term int64) (bool, error) {
	n, err := l.queries(ctx).LiftFreeze(ctx, l.fabric, term)
	return n == 1, err
}

// lease is row with its times in UTC (MariaDB's driver reads them in the
// connection's location).
func lease(row driver.ReadLeaseRow) Lease {
	return Lease{Term: row.Term, Holder: row.Holder, Heartbeat: utc(row.Heartbeat), ExpiresAt: utc(row.ExpiresAt),
		Now: row.DbNow.UTC(), PreviousHolder: row.PreviousHolder, PreviousExpired: row.PreviousExpired,
		Suspect: row.Suspect, Freeze: row.FreezeReason, UnfreezeRequested: row.UnfreezeRequested}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Unfreeze asks the leader to lift its freeze (--unfreeze). It says whether
// there was a freeze to lift.
func (s *Store) Unfreeze(ctx context.Context) (Lease, error) {
	l, err := s.Leases()
	if err != nil {
		return Lease{}, err
	}
	if _, err := l.RequestUnfreeze(ctx); err != nil {
		return Lease{}, fmt.Errorf("request unfreeze: %w", err)
	}
	lease, err := l.ReadLease(ctx)
	if err != nil {
		return Lease{}, fmt.Errorf("read lease: %w", err)
	}
	return lease, nil
}

// maxFreeze bounds a freeze's reason (the column holds 4000 characters on
// MariaDB).
const maxFreeze = 4000

// FreezeReason makes reason fit the freeze column: one line, bounded.
func FreezeReason(reason string) string {
	return oneLine(reason, maxFreeze)
}
