// Package store is the one way the rest of the manager reads and writes the
// database, whatever the engine.
//
// The rules that decide what a request records live here, written once; each
// engine (store/postgres, store/mysql, store/sqlite) only says what differs
// between databases (store/driver). Every accepted change increments the
// revision, records the desired state, and inserts the job that carries that
// revision; the changes that wait for one another commit together, in one
// transaction (group.go). A rejected request writes nothing.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Job statuses, as networking-mlnx and DBAs read them.
const (
	StatusPending   = "Pending"
	StatusRunning   = "Running"
	StatusCompleted = "Completed"
	StatusFailed    = "Failed"
)

// Job operations, as UFM names them.
const (
	OpCreateNetwork = "Create network"
	OpUpdateNetwork = "Update network"
	OpDeleteNetwork = "Delete network"
	OpAddPort       = "Add port to network"
	OpUpdatePort    = "Update port"
	OpRemovePort    = "Remove port from network"
)

// Object types of a job.
const (
	ObjectNetwork = "network"
	ObjectPort    = "port"
)

// ErrNotFound is returned when the object asked for is not recorded.
var ErrNotFound = errors.New("not found")

// RejectedError is a request that can never be applied: it is answered 400 and
// nothing is recorded.
type RejectedError struct {
	Reason string
	// Held names, for the manager's log only, the other owner's object that
	// holds what the request named (an OpenStack network and port, a
	// Kubernetes pkey); Reason says only "held by another owner", so that a
	// refusal tells no client what another one holds.
	Held string
}

func (e *RejectedError) Error() string { return e.Reason }

func rejectf(format string, args ...any) error {
	return &RejectedError{Reason: fmt.Sprintf(format, args...)}
}

// heldByAnother refuses a request naming what another owner holds: the
// answer says so, and held, which names that owner's object, goes to the
// log alone.
func heldByAnother(held, format string, args ...any) error {
	return &RejectedError{Reason: fmt.Sprintf(format, args...), Held: held}
}

// Network is a recorded Neutron network. Managed networks have a partition:
// their own (PKey = VLAN ID) or, with PKey nil, the flat networks' shared one.
// Networks that are not managed (other physnets, other types) are recorded so
// that their later requests are answered alike; they have no pkey and their
// ports hold no GUID.
type Network struct {
	ID              string
	Name            string
	Type            string
	PhysicalNetwork string
	PKey            *fabric.PKey
	Managed         bool
	Revision        int64
}

// Port is a recorded Neutron port. GUID is nil when the port holds no membership:
// it is unbound, has no client-id, or its network has no partition.
type Port struct {
	ID        string
	NetworkID string
	GUID      *fabric.GUID
	Host      string
	Revision  int64
}

// Job is what networking-mlnx polls: the seam's row of the jobs table, so
// that a job read or inserted reaches the caller as the table holds it.
type Job = driver.Job

// OpenJob is a job not finished yet, with what an OpenSM error can name of its
// change: the GUID its port holds now (nil for a network's job, or a port that
// holds none), and the places its change promised (places.go).
type OpenJob struct {
	ID         int64
	ObjectType string
	ObjectID   string
	NetworkID  string
	GUID       *fabric.GUID
	Places     []Place
}

// Apply is one attempt to bring OpenSM to a revision: what RecordApply's
// query records, and LastApply reads.
type Apply struct {
	Revision   int64
	SHA256     string
	Term       int64
	Outcome    string
	Detail     string
	StartedAt  time.Time
	FinishedAt time.Time
	// NewestJob is the applied snapshot's (Snapshot.NewestJob): FinishApply
	// completes no job once the database no longer holds that state
	// (history.go). 0 checks nothing (no snapshot, or one read before any
	// job). Not recorded.
	NewestJob int64
}

// row is what RecordApply's query records of a, an apply of fabric's.
func (a Apply) row(fabric string) driver.RecordApplyParams {
	return driver.RecordApplyParams{Fabric: fabric, Revision: a.Revision, SHA256: a.SHA256, Term: a.Term, Outcome: a.Outcome,
		Detail: a.Detail, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt}
}

// Member is one port's membership: its GUID in its network's partition.
type Member struct {
	NetworkID string
	GUID      fabric.GUID
	PortID    string // the port that holds it (a GUID is held by one port at most)
}

// Snapshot is the recorded state at one revision, read in one transaction: the
// managed networks (VLAN ones with their pkeys, flat ones with PKey nil),
// every membership of a port in its managed network, and the Kubernetes
// partitions.
type Snapshot struct {
	Revision int64
	Networks []Network
	Members  []Member
	// Kubernetes are the Kubernetes partitions, in pkey order.
	Kubernetes []KubernetesPKey
	// Adopted are the adopted partitions (adopted.go), in pkey order.
	Adopted []AdoptedPartition
	// NewestJob is the newest job's id when the state was read (0: none):
	// what tells this state from another a restore gives the same revision
	// (history.go). An apply of the snapshot passes it on (Apply.NewestJob).
	NewestJob int64
}

// Lock is the applier lock, held on a connection of its own.
//
// The lock's session ends on the server once idle for LockSessionIdle: its
// holder checks it far more often, so an idle session is one whose client is
// gone (a cut link), and another term must be able to take the lock.
type Lock = driver.Lock

// LockSessionIdle is how long the server keeps an idle lock session.
const LockSessionIdle = driver.LockSessionIdle

// IdleTransactionFor is how long the server keeps a session idle inside a
// transaction, for a lease of leaseTimeout (driver.IdleTransactionFor).
func IdleTransactionFor(leaseTimeout time.Duration) driver.Option {
	return driver.WithIdleTransaction(driver.IdleTransactionFor(leaseTimeout))
}

// Store is the manager's view of the database: its methods are the only way
// in, each checks its input, and every time it records is the store's clock.
type Store struct {
	d     driver.Driver
	rules Rules
	now   func() time.Time
	// groups queue this process's changes for group commit (group.go);
	// kubeGroups Kubernetes' (its lane: one change a group).
	groups, kubeGroups *changeGroups
	// fabric is the fabric this view acts on ("": DefaultFabric); db the
	// database it is a view of (fabrics.go).
	fabric string
	db     *DB
}

// New wraps an engine's driver serving one fabric, the default, with the
// rules that decide what a request records; it returns that fabric's view.
func New(d driver.Driver, rules Rules) *Store {
	s := newView(d, rules)
	s.db = &DB{d: d, order: []string{DefaultFabric}, views: map[string]*Store{DefaultFabric: s}}
	return s
}

// newView is a fabric's view on d, with its own change groups, not yet
// given its database.
func newView(d driver.Driver, rules Rules) *Store {
	return &Store{d: d, rules: rules, now: func() time.Time { return time.Now().UTC() }, groups: &changeGroups{},
		kubeGroups: &changeGroups{max: 1}}
}

// DB is the database s is a view of.
func (s *Store) DB() *DB { return s.db }

// WithRules is a store on the same connections (and change groups) with other
// rules: for tests and tools that look at one database through several rule
// sets. s is unchanged.
func (s *Store) WithRules(rules Rules) *Store {
	c := *s
	c.rules = rules
	c.rules.fabric = s.rules.fabric
	return &c
}

// WithClock is a store on the same connections (and change groups) whose clock
// is now: for tests that record at a time of their choosing. s is unchanged.
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

// TryLock takes the fabric's applier lock if it is free; nil Lock if another
// holds it.
func (s *Store) TryLock(ctx context.Context) (Lock, error) { return s.d.TryLock(ctx, s.FabricName()) }

// Wake returns a channel that receives after the revision may have changed.
// It is only a hint: callers also poll.
func (s *Store) Wake(ctx context.Context) <-chan struct{} {
	if w, ok := s.d.(fabricWaker); ok && s.db.routes {
		return w.WakeFabric(ctx, s.FabricName())
	}
	return s.d.Wake(ctx)
}

// TakeCommitted returns the newest revision of s's fabric that this process's
// changes committed since it was last taken (ok false: none), and forgets
// it: the applier's loop, woken by such a change, starts its apply without
// reading the revision. It is a hint, as a wake-up is: the revision was
// committed, but another process may have committed a newer one since (the
// apply's snapshot read says which it renders), or the database been
// restored from a backup (taken once, it makes at most one apply more).
func (s *Store) TakeCommitted() (int64, bool) {
	if c, ok := s.d.(committedTaker); ok {
		return c.TakeCommitted(s.FabricName())
	}
	return 0, false
}

// committedTaker is an engine that keeps the revisions its process's
// changes committed (driver.LocalWake).
type committedTaker interface {
	TakeCommitted(fabric string) (int64, bool)
}

// fabricWaker is an engine whose wake-ups name the fabric (PostgreSQL's
// notifications): a view of several fabrics waits for its own only.
type fabricWaker interface {
	WakeFabric(ctx context.Context, fabric string) <-chan struct{}
}

// readOnly returns what read finds in one read-only transaction of s (it
// neither waits for a change nor holds one up); its error says what was read.
func readOnly[T any](ctx context.Context, s *Store, what string, read func(context.Context, driver.Queries) (T, error)) (T, error) {
	var out T
	err := s.d.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
		var err error
		out, err = read(ctx, q)
		return err
	})
	if err != nil {
		var none T
		return none, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
