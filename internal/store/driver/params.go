package driver

import (
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The arguments of the queries that take more than four, owned by the seam: a
// call names each argument, so none can take another's place, and adaptergen
// passes each field to the generated parameter (or MariaDB's Params field) of
// its name, compared without case, and type.

// UpsertNetworkParams are UpsertNetwork's arguments: a network as it now is.
type UpsertNetworkParams struct {
	ID              string
	Name            string
	NetworkType     string
	PhysicalNetwork string
	PKey            *fabric.PKey
	Managed         bool
	Revision        int64
	Now             time.Time
	Fabric          string
}

// UpsertPortParams are UpsertPort's arguments: a port as it now is.
type UpsertPortParams struct {
	ID        string
	NetworkID string
	GUID      *fabric.GUID
	Host      string
	Revision  int64
	Now       time.Time
	Fabric    string
}

// RecordApplyParams are RecordApply's arguments: an apply, recorded if Term
// is still the current term.
type RecordApplyParams struct {
	Revision   int64
	SHA256     string
	Term       int64
	Outcome    string
	Detail     string
	StartedAt  time.Time
	FinishedAt time.Time
	Fabric     string
}

// RecordApplyOfHistoryParams are RecordApplyOfHistory's arguments: an
// apply, recorded if Term is still the current term and the job NewestJob
// is still recorded (0: no job to check).
type RecordApplyOfHistoryParams struct {
	Revision   int64
	SHA256     string
	Term       int64
	Outcome    string
	Detail     string
	StartedAt  time.Time
	FinishedAt time.Time
	Fabric     string
	NewestJob  int64
}

// UpsertAdoptedPartitionParams are UpsertAdoptedPartition's arguments: an
// adopted partition's statement at the revision that recorded it.
type UpsertAdoptedPartitionParams struct {
	PKey      fabric.PKey
	Name      string
	Statement string
	Revision  int64
	Now       time.Time
	Fabric    string
}

// UpsertKubernetesMemberParams are UpsertKubernetesMember's arguments: a
// GUID's membership of a Kubernetes pkey.
type UpsertKubernetesMemberParams struct {
	PKey       fabric.PKey
	GUID       fabric.GUID
	Membership string
	Index0     bool
	Revision   int64
	Now        time.Time
	Fabric     string
}

// UpsertDuplicateGUIDParams are UpsertDuplicateGUID's arguments: a GUID
// OpenSM found twice, Occurrences more times, recorded if Term is still the
// current term.
type UpsertDuplicateGUIDParams struct {
	Fabric      string
	GUID        string
	Kind        string
	Places      string
	Line        string
	Now         time.Time
	Occurrences int64
	Term        int64
}

// UpsertEnforcementErrorParams are UpsertEnforcementError's arguments: an
// error a switch port reported, recorded if Term is still the current term.
type UpsertEnforcementErrorParams struct {
	SwitchGUID string
	Port       int64
	Line       string
	Now        time.Time
	Term       int64
	Fabric     string
}

// InsertSecondSMParams are InsertSecondSM's arguments: a master subnet
// manager that is not the leader's own OpenSM, recorded if Term is still the
// current term.
type InsertSecondSMParams struct {
	PortGUID string
	Priority int64
	State    string
	OwnState string
	Term     int64
	Now      time.Time
	Fabric   string
}

// GUIDPlaceParams are AcceptGUIDPlace's arguments: the switch port an
// operator accepts as a GUID's place.
type GUIDPlaceParams struct {
	Fabric     string
	GUID       fabric.GUID
	SwitchGUID fabric.GUID
	SwitchPort int64
	Now        time.Time
}

// InsertGUIDPlaceParams are InsertGUIDPlace's arguments: a GUID's first
// place, recorded if Term is still the current term.
type InsertGUIDPlaceParams struct {
	Fabric     string
	GUID       fabric.GUID
	SwitchGUID fabric.GUID
	SwitchPort int64
	Now        time.Time
	Term       int64
}

// InsertConfirmedHostParams are InsertConfirmedHost's arguments: one port
// of a host an operator confirmed (--confirm-hosts).
type InsertConfirmedHostParams struct {
	Fabric      string
	GUID        fabric.GUID
	Name        string
	Description string
	Now         time.Time
}

// MarkGUIDMovedParams are MarkGUIDMoved's arguments: where a GUID recorded
// behind SwitchGUID:SwitchPort was seen instead ("" when back there),
// recorded if Term is still the current term.
type MarkGUIDMovedParams struct {
	MovedTo    string
	Now        time.Time
	Fabric     string
	GUID       fabric.GUID
	SwitchGUID fabric.GUID
	SwitchPort int64
	Term       int64
}
