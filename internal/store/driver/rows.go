package driver

import (
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The rows the queries return, owned by the seam: each engine's generated
// package has a struct of the same fields (sqlc.yaml's overrides give every
// engine the same Go types), and its adapters (adapters_gen.go) convert it to
// one of these with a plain type conversion, which compiles only while the
// fields stay the same, by name, type and order. A query whose row changes
// changes its struct here too.

// Apply is one apply of the fabric's state to OpenSM (LastApply).
type Apply struct {
	ID         int64
	Revision   int64
	Sha256     string
	Term       int64
	Outcome    string
	Detail     string
	StartedAt  time.Time
	FinishedAt time.Time
	Fabric     string
}

// DuplicateGUID is a GUID OpenSM found twice on the fabric.
type DuplicateGUID struct {
	Fabric      string
	Guid        string
	Kind        string
	Places      string
	Line        string
	FirstSeen   time.Time
	LastSeen    time.Time
	Occurrences int64
}

// EnforcementError is one pkey enforcement error a switch port reported.
type EnforcementError struct {
	SwitchGuid  string
	Port        int64
	Line        string
	FirstSeen   time.Time
	LastSeen    time.Time
	Occurrences int64
	Fabric      string
}

// ExpectedSwitch is a switch confirmed to enforce pkeys.
type ExpectedSwitch struct {
	Guid        fabric.GUID
	Description string
	ConfirmedAt time.Time
	Fabric      string
}

// ConfirmedHostsRow is one port of a host an operator confirmed: the host's
// name and its node description when it was confirmed.
type ConfirmedHostsRow struct {
	Guid        fabric.GUID
	Name        string
	Description string
	ConfirmedAt time.Time
}

// Job is one job, as the jobs table holds it.
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
	// RequestID is the ID of the API request that recorded the job (its
	// X-Request-ID), the jobs table's request_id; last, as the column is.
	RequestID string
	Fabric    string
}

// AdoptedPartition is one partition of a running fabric that --adopt-partitions
// recorded: its statement as the running file wrote it.
type AdoptedPartition struct {
	Pkey      fabric.PKey
	Name      string
	Statement string
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Fabric    string
}

// KubernetesMember is one GUID's membership of a Kubernetes pkey.
type KubernetesMember struct {
	Pkey       fabric.PKey
	Guid       fabric.GUID
	Membership string
	Index0     bool
	Revision   int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Fabric     string
}

// KubernetesPKey is one pkey of the Kubernetes API.
type KubernetesPKey struct {
	Pkey      fabric.PKey
	IpOverIb  bool
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Fabric    string
	// Owner is the pkeys client that created it: its [ufm_pkeys:NAME] NAME,
	// "" for [ufm_pkeys] (migration 00020).
	Owner string
	// MtuLimit, ServiceLevel and RateLimitMbps are its QoS: UFM's mtu_limit
	// (KB), service_level and rate_limit in Mb/s.
	MtuLimit      int64
	ServiceLevel  int64
	RateLimitMbps int64
	// QosSet says a client set the QoS; the values of an unset pkey are
	// only what a first change of one field starts from.
	QosSet bool
}

// KubernetesPartitionName is the name a client gave a Kubernetes pkey.
type KubernetesPartitionName struct {
	Pkey          fabric.PKey
	PartitionName *string
}

// Network is one Neutron network.
type Network struct {
	ID              string
	Name            string
	NetworkType     string
	PhysicalNetwork string
	Pkey            *fabric.PKey
	Revision        int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
	Managed         bool
	Fabric          string
}

// Port is one Neutron port.
type Port struct {
	ID        string
	NetworkID string
	Guid      *fabric.GUID
	Host      string
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Fabric    string
}

// CountJobsByStatusRow is CountJobsByStatus's row.
type CountJobsByStatusRow struct {
	Status string
	N      int64
}

// CountMembersByNetworkRow is CountMembersByNetwork's row.
type CountMembersByNetworkRow struct {
	NetworkID string
	N         int64
}

// GateSwitchesRow is GateSwitches' row: a confirmed switch with the count of
// its recorded enforcement errors.
type GateSwitchesRow struct {
	Guid              fabric.GUID
	Description       string
	ConfirmedAt       time.Time
	EnforcementErrors int64
}

// GetPortChangeRowsRow is GetPortChangeRows' row: a network, with the port
// (or none: the port fields are nil) a change names.
type GetPortChangeRowsRow struct {
	ID              string
	Name            string
	NetworkType     string
	PhysicalNetwork string
	Pkey            *fabric.PKey
	Managed         bool
	Revision        int64
	PortID          *string
	PortNetworkID   *string
	PortGuid        *fabric.GUID
	PortHost        *string
	Fabric          string
	PortFabric      *string
	PortRevision    *int64
	// Adopted counts the fabric's adopted partitions.
	Adopted int64
	// SmFabric names a fabric whose subnet manager's port the change's GUID
	// is (nil: none), each such fabric on rows of its own.
	SmFabric *string
	// StateRevision is the fabric's revision as the change's transaction
	// left it: the revision the group's held bump took.
	StateRevision int64
}

// SnapshotHeadRow is SnapshotHead's row.
type SnapshotHeadRow struct {
	Revision           int64
	NewestJob          int64
	KeptJobs           int64
	Networks           int64
	Members            int64
	KubernetesRevision int64
	// Adopted counts the adopted partitions; AdoptedSince those written at
	// or after the revision asked for.
	Adopted      int64
	AdoptedSince int64
}

// KubernetesStateRow is KubernetesState's row.
type KubernetesStateRow struct {
	ChangedRevision int64
	AppliedRevision int64
	LastUpdated     *time.Time
}

// PrincipalUsageRow is PrincipalUsage's row.
type PrincipalUsageRow struct {
	RecentJobs   int64
	RequestBytes int64
}

// LeadershipRow is Leadership's row.
type LeadershipRow struct {
	Term      int64
	Holder    string
	Heartbeat *time.Time
}

// ListSecretsRow is ListSecrets' row.
type ListSecretsRow struct {
	Name  string
	Value string
}

// OpenJobsWithGUIDsRow is OpenJobsWithGUIDs' row: an open job, with the GUID
// its port holds now (nil for a network's job) and the places its insert
// wrote in its row (PlacesJSON; "" for none, or for a job whose places are
// rows of job_places).
type OpenJobsWithGUIDsRow struct {
	ID         int64
	ObjectType string
	ObjectID   string
	NetworkID  string
	Guid       *fabric.GUID
	Places     string
}

// OpenJobPlacesRow is OpenJobPlaces' row: one place an open job's change
// promised, as a row of job_places (a job recorded before migration 00019,
// or by the previous release).
type OpenJobPlacesRow struct {
	JobID int64
	Guid  fabric.GUID
	Pkey  fabric.PKey
	Want  string
}

// ReadLeaseRow is the leadership row as ReadLease reads it, with the
// database's clock (DbNow).
type ReadLeaseRow struct {
	Term              int64
	Holder            string
	Heartbeat         *time.Time
	ExpiresAt         *time.Time
	DbNow             time.Time
	PreviousHolder    string
	PreviousExpired   bool
	Suspect           string
	FreezeReason      string
	UnfreezeRequested bool
}

// LastAuditRow is the last fabric audit's summary (LastAudit).
type LastAuditRow struct {
	Term      int64
	Revision  int64
	StartedAt time.Time
	TookMs    int64
	Findings  int64
	Breaches  int64
	Summary   string
	Fabric    string
}

// SecondSubnetManager is a master subnet manager on the fabric that is not
// the leader's own OpenSM, as the leader recorded it.
type SecondSubnetManager struct {
	PortGuid string
	Priority int64
	State    string
	OwnState string
	Term     int64
	SeenAt   time.Time
	Fabric   string
}

// SubnetManagerPort is the port a manager's OpenSM runs on, as that manager
// recorded it for one of its fabrics.
type SubnetManagerPort struct {
	Fabric   string
	PortGuid string
	Holder   string
	SeenAt   time.Time
}

// SetFailure is a host port that did not take OpenSM's Sets, as the leader
// recorded it.
type SetFailure struct {
	PortGuid string
	Since    time.Time
	Term     int64
	Fabric   string
}

// GUIDPlace is the switch port a GUID of the partitions was recorded behind.
type GUIDPlace struct {
	Fabric     string
	Guid       fabric.GUID
	SwitchGuid fabric.GUID
	SwitchPort int64
	RecordedAt time.Time
	MovedTo    string
	MovedAt    time.Time
}
