// Package store is the one way the rest of the manager reads and writes the
// database, whatever the engine.
//
// The rules that decide what a request records live here, written once; each
// engine (store/postgres, store/mysql, store/sqlite) only adapts its sqlc-generated
// queries to the small Engine and Tx interfaces below. Every accepted change is
// one transaction that increments the revision, records the desired state, and
// inserts the job that carries that revision (DESIGN.md §3). A rejected request
// writes nothing.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
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
type RejectedError struct{ Reason string }

func (e *RejectedError) Error() string { return e.Reason }

func rejectf(format string, args ...any) error {
	return &RejectedError{Reason: fmt.Sprintf(format, args...)}
}

// Network is a recorded Neutron network. PKey is nil for a flat network.
type Network struct {
	ID              string
	Name            string
	Type            string
	PhysicalNetwork string
	PKey            *fabric.PKey
	Revision        int64
}

// Port is a recorded Neutron port. GUID is nil when the port holds no membership.
type Port struct {
	ID        string
	NetworkID string
	GUID      *fabric.GUID
	Host      string
	Revision  int64
}

// Job is what networking-mlnx polls.
type Job struct {
	ID          int64
	Revision    int64
	ObjectType  string
	ObjectID    string
	NetworkID   string
	Operation   string
	Status      string
	Description string
	Result      string // what is true once the job has completed
	Error       string // why it failed
	CreatedBy   string
	Request     string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
}

// NewJob is a job about to be inserted.
type NewJob struct {
	Revision    int64
	ObjectType  string
	ObjectID    string
	NetworkID   string
	Operation   string
	Description string
	Result      string
	CreatedBy   string
	Request     string
	Now         time.Time
}

// Apply is one attempt to bring OpenSM to a revision.
type Apply struct {
	Revision   int64
	SHA256     string
	Term       int64
	Outcome    string
	Detail     string
	StartedAt  time.Time
	FinishedAt time.Time
}

// Member is one port's membership: its GUID in its network's partition.
type Member struct {
	NetworkID string
	GUID      fabric.GUID
}

// Snapshot is the recorded state at one revision, read in one transaction.
type Snapshot struct {
	Revision int64
	Networks []Network
	Members  []Member
}

// Tx is what a change transaction can do. The engine has already incremented
// the revision when it hands a Tx out.
type Tx interface {
	GetNetwork(ctx context.Context, id string) (Network, error)
	GetNetworkByPKey(ctx context.Context, pkey fabric.PKey) (Network, error)
	UpsertNetwork(ctx context.Context, n Network, now time.Time) error
	DeleteNetwork(ctx context.Context, id string) (bool, error)
	GetPort(ctx context.Context, id string) (Port, error)
	GetPortByGUID(ctx context.Context, guid fabric.GUID) (Port, error)
	UpsertPort(ctx context.Context, p Port, now time.Time) error
	DeletePort(ctx context.Context, id string) (bool, error)
	DeletePortsOfNetwork(ctx context.Context, networkID string) (int64, error)
	InsertJob(ctx context.Context, j NewJob) (int64, error)
}

// Engine adapts one database engine. Applier writes take the leadership term and
// change nothing when it is no longer the current one (fencing).
type Engine interface {
	// Name is "postgres", "mysql" or "sqlite".
	Name() string
	// Change runs fn in one transaction whose first statement increments the
	// revision; fn gets the new revision. An error from fn rolls everything back.
	Change(ctx context.Context, fn func(tx Tx, revision int64) error) error

	Revision(ctx context.Context) (int64, error)
	Snapshot(ctx context.Context) (Snapshot, error)
	GetJob(ctx context.Context, id int64) (Job, error)
	CountJobsByStatus(ctx context.Context) (map[string]int64, error)

	NewTerm(ctx context.Context, holder string, now time.Time) (int64, error)
	MarkJobsRunning(ctx context.Context, term, revision int64, now time.Time) (int64, error)
	CompleteJobs(ctx context.Context, term, revision int64, now time.Time) (int64, error)
	FailJobs(ctx context.Context, term, revision int64, reason string, now time.Time) (int64, error)
	// RecordApply inserts the apply if term is still current; false otherwise.
	RecordApply(ctx context.Context, a Apply) (bool, error)
	LastApply(ctx context.Context) (Apply, error)

	// TryLock takes the applier lock if it is free; nil Lock if another holds it.
	TryLock(ctx context.Context) (Lock, error)
	// Wake returns a channel that receives after the revision may have changed.
	// It is only a hint: callers also poll.
	Wake(ctx context.Context) <-chan struct{}

	Migrate(ctx context.Context) error
	Close() error

	FabricTables // fabric.go
	StatusTables // status.go
}

// Lock is the applier lock, held on a connection of its own.
type Lock interface {
	// Check returns an error once the lock may have been lost.
	Check(ctx context.Context) error
	Release(ctx context.Context) error
}

// Store is the manager's view of the database.
type Store struct {
	Engine
	now func() time.Time
}

// New wraps an engine.
func New(e Engine) *Store {
	return &Store{Engine: e, now: func() time.Time { return time.Now().UTC() }}
}

// NetworkChange is a POST or PUT of a network.
type NetworkChange struct {
	Network   Network
	Operation string // OpCreateNetwork or OpUpdateNetwork
	CreatedBy string
	Request   string
}

// RecordNetwork records a network (create or update alike: both make it so).
func (s *Store) RecordNetwork(ctx context.Context, c NetworkChange) (Job, error) {
	n := c.Network
	if n.PKey == nil {
		return Job{}, rejectf("network %s: no VLAN ID (provider:segmentation_id)", n.ID)
	}
	var job Job
	err := s.Change(ctx, func(tx Tx, rev int64) error {
		// A pkey is one network's partition: a second network on the same VLAN
		// ID would merge two tenants.
		if other, err := tx.GetNetworkByPKey(ctx, *n.PKey); err == nil && other.ID != n.ID {
			return rejectf("network %s: VLAN ID %d is already the partition key %s of network %s",
				n.ID, uint16(*n.PKey), *n.PKey, other.ID)
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		now := s.now()
		n.Revision = rev
		if err := tx.UpsertNetwork(ctx, n, now); err != nil {
			return err
		}
		var err error
		job, err = insertJob(ctx, tx, NewJob{
			Revision: rev, ObjectType: ObjectNetwork, ObjectID: n.ID, NetworkID: n.ID,
			Operation:   c.Operation,
			Description: fmt.Sprintf("%s %s (pkey %s)", verb(c.Operation), n.ID, *n.PKey),
			Result:      fmt.Sprintf("partition %s of network %s is in place", *n.PKey, n.ID),
			CreatedBy:   c.CreatedBy, Request: c.Request, Now: now,
		})
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("record network %s: %w", n.ID, err)
	}
	return job, nil
}

// RemoveNetwork deletes a network, its partition and its ports.
func (s *Store) RemoveNetwork(ctx context.Context, networkID, createdBy, request string) (Job, error) {
	var job Job
	err := s.Change(ctx, func(tx Tx, rev int64) error {
		n, err := tx.GetNetwork(ctx, networkID)
		if err != nil {
			return err
		}
		if _, err := tx.DeletePortsOfNetwork(ctx, networkID); err != nil {
			return err
		}
		if _, err := tx.DeleteNetwork(ctx, networkID); err != nil {
			return err
		}
		now := s.now()
		job, err = insertJob(ctx, tx, NewJob{
			Revision: rev, ObjectType: ObjectNetwork, ObjectID: networkID, NetworkID: networkID,
			Operation:   OpDeleteNetwork,
			Description: fmt.Sprintf("Delete network %s (pkey %s)", networkID, pkeyText(n.PKey)),
			Result:      fmt.Sprintf("partition %s of network %s is removed", pkeyText(n.PKey), networkID),
			CreatedBy:   createdBy, Request: request, Now: now,
		})
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("remove network %s: %w", networkID, err)
	}
	return job, nil
}

// PortChange is a POST or PUT of a port that carries a usable client-id.
type PortChange struct {
	Port      Port
	Operation string // OpAddPort or OpUpdatePort
	CreatedBy string
	Request   string
}

// RecordPort records a port and its membership in its network's partition.
func (s *Store) RecordPort(ctx context.Context, c PortChange) (Job, error) {
	p := c.Port
	if p.GUID == nil {
		return Job{}, rejectf("port %s: no usable client-id", p.ID)
	}
	var job Job
	err := s.Change(ctx, func(tx Tx, rev int64) error {
		n, err := tx.GetNetwork(ctx, p.NetworkID)
		if errors.Is(err, ErrNotFound) {
			return rejectf("port %s: network %s is unknown: it has no partition", p.ID, p.NetworkID)
		}
		if err != nil {
			return err
		}
		if other, err := tx.GetPortByGUID(ctx, *p.GUID); err == nil && other.ID != p.ID {
			return rejectf("port %s: GUID %s already belongs to port %s of network %s",
				p.ID, *p.GUID, other.ID, other.NetworkID)
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		now := s.now()
		p.Revision = rev
		if err := tx.UpsertPort(ctx, p, now); err != nil {
			return err
		}
		job, err = insertJob(ctx, tx, NewJob{
			Revision: rev, ObjectType: ObjectPort, ObjectID: p.ID, NetworkID: p.NetworkID,
			Operation: c.Operation,
			Description: fmt.Sprintf("%s %s (GUID %s) to network %s (pkey %s)",
				verb(c.Operation), p.ID, *p.GUID, n.ID, pkeyText(n.PKey)),
			Result:    fmt.Sprintf("GUID %s is a full member of pkey %s", *p.GUID, pkeyText(n.PKey)),
			CreatedBy: c.CreatedBy, Request: c.Request, Now: now,
		})
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("record port %s: %w", p.ID, err)
	}
	return job, nil
}

// RemovePort deletes a port and with it its GUID's membership.
func (s *Store) RemovePort(ctx context.Context, portID, createdBy, request string) (Job, error) {
	var job Job
	err := s.Change(ctx, func(tx Tx, rev int64) error {
		p, err := tx.GetPort(ctx, portID)
		if err != nil {
			return err
		}
		if _, err := tx.DeletePort(ctx, portID); err != nil {
			return err
		}
		guid, result := "no GUID", fmt.Sprintf("port %s is removed", portID)
		if p.GUID != nil {
			guid = "GUID " + p.GUID.String()
			result = fmt.Sprintf("GUID %s is no member of network %s's partition", *p.GUID, p.NetworkID)
		}
		job, err = insertJob(ctx, tx, NewJob{
			Revision: rev, ObjectType: ObjectPort, ObjectID: portID, NetworkID: p.NetworkID,
			Operation:   OpRemovePort,
			Description: fmt.Sprintf("Remove port %s (%s) from network %s", portID, guid, p.NetworkID),
			Result:      result,
			CreatedBy:   createdBy, Request: request, Now: s.now(),
		})
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("remove port %s: %w", portID, err)
	}
	return job, nil
}

// insertJob inserts j and returns the job as it now stands, sparing the caller a
// read of what it has just written.
func insertJob(ctx context.Context, tx Tx, j NewJob) (Job, error) {
	id, err := tx.InsertJob(ctx, j)
	if err != nil {
		return Job{}, err
	}
	return Job{ID: id, Revision: j.Revision, ObjectType: j.ObjectType, ObjectID: j.ObjectID,
		NetworkID: j.NetworkID, Operation: j.Operation, Status: StatusPending, Description: j.Description,
		Result: j.Result, CreatedBy: j.CreatedBy, Request: j.Request, CreatedAt: j.Now, UpdatedAt: j.Now}, nil
}

func verb(op string) string {
	switch op {
	case OpCreateNetwork:
		return "Create network"
	case OpUpdateNetwork:
		return "Update network"
	case OpAddPort:
		return "Add port"
	case OpUpdatePort:
		return "Update port"
	}
	return op
}

func pkeyText(p *fabric.PKey) string {
	if p == nil {
		return "none"
	}
	return p.String()
}
