package driver

import (
	"context"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Queries is every query the store runs, each method the query of the same
// name in queries/ (queries/shared, or each engine's folder where the SQL
// differs), returning the rows of rows.go: the generated packages in db/
// implement it through the adapters adaptergen writes into each engine
// package (and the few methods an engine package writes where it truly
// differs). The seam imports none of the generated packages.
//
// To add a query: write it, under one name, in queries/shared (or in
// queries/postgres and queries/sqlite) and in queries/mysql; run make
// generate; add its generated signature here, its row to rows.go (and, for
// more than four arguments, a params struct to params.go); run make generate
// again. See docs/architecture.md.
type Queries interface {
	AcceptGUIDPlace(ctx context.Context, arg GUIDPlaceParams) error
	BumpRevision(ctx context.Context, fabric string) (int64, error)
	BumpRevisionLater(ctx context.Context, fabric string) error
	ClearEnforcementErrors(ctx context.Context, fabric string) (int64, error)
	ClearGUIDsOfNetwork(ctx context.Context, fabric string, revision int64, now time.Time, networkID string) (int64, error)
	CompleteJob(ctx context.Context, fabric string, now *time.Time, jobID int64, revision int64, term int64) (int64, error)
	CompleteJobs(ctx context.Context, fabric string, now *time.Time, revision int64, term int64) (int64, error)
	CountJobsByStatus(ctx context.Context, fabric string) ([]CountJobsByStatusRow, error)
	DeleteAppliesBefore(ctx context.Context, fabric string, keepFrom int64, before time.Time, batch int64, term int64) (int64, error)
	DeleteAdoptedPartition(ctx context.Context, fabric string, pkey fabric.PKey) (int64, error)
	DeleteGUIDPlace(ctx context.Context, fabric string, guid fabric.GUID) (int64, error)
	DeleteExpectedSwitches(ctx context.Context, fabric string) error
	DeleteConfirmedHosts(ctx context.Context, fabric string) error
	ConfirmedHosts(ctx context.Context, fabric string) ([]ConfirmedHostsRow, error)
	DeleteFinishedJobsBefore(ctx context.Context, fabric string, before *time.Time, batch int64, term int64) (int64, error)
	DeleteForeignSMs(ctx context.Context, fabric string, term int64) (int64, error)
	DeleteKubernetesMember(ctx context.Context, fabric string, pkey fabric.PKey, guid fabric.GUID) (int64, error)
	DeleteKubernetesMembersOfPKey(ctx context.Context, fabric string, pkey fabric.PKey) (int64, error)
	DeleteKubernetesPKey(ctx context.Context, fabric string, pkey fabric.PKey) (int64, error)
	DeleteNetwork(ctx context.Context, fabric string, id string) (int64, error)
	DeletePort(ctx context.Context, fabric string, id string) (int64, error)
	DeletePortsOfNetwork(ctx context.Context, fabric string, networkID string) (int64, error)
	DeleteDuplicateGUIDs(ctx context.Context, fabric string, term int64) (int64, error)
	DeleteSecondSMs(ctx context.Context, fabric string, term int64) (int64, error)
	DeleteSetFailures(ctx context.Context, fabric string, term int64) (int64, error)
	DescribeOpenJobs(ctx context.Context, fabric string, reason string, now time.Time, revision int64, term int64) (int64, error)
	DescribeJob(ctx context.Context, reason string, now time.Time, jobID int64, fabric string, term int64) (int64, error)
	DuplicateGUIDs(ctx context.Context, fabric string) ([]DuplicateGUID, error)
	EnforcementErrors(ctx context.Context, fabric string) ([]EnforcementError, error)
	ExpectedSwitches(ctx context.Context, fabric string) ([]ExpectedSwitch, error)
	FailJob(ctx context.Context, fabric string, error string, now *time.Time, jobID int64, term int64) (int64, error)
	FailJobs(ctx context.Context, fabric string, error string, now *time.Time, revision int64, term int64) (int64, error)
	CountMembersByNetwork(ctx context.Context, fabric string) ([]CountMembersByNetworkRow, error)
	FirstApplyToKeep(ctx context.Context, fabric string) (int64, error)
	ForeignSMs(ctx context.Context, fabric string) ([]SecondSubnetManager, error)
	GUIDPlaces(ctx context.Context, fabric string) ([]GUIDPlace, error)
	GateSwitches(ctx context.Context, fabric string) ([]GateSwitchesRow, error)
	GetJob(ctx context.Context, id int64) (Job, error)
	GetKubernetesPKey(ctx context.Context, fabric string, pkey fabric.PKey) (KubernetesPKey, error)
	GetNetwork(ctx context.Context, id string) (Network, error)
	GetNetworkByPKey(ctx context.Context, fabric string, pkey *fabric.PKey) (Network, error)
	GetPort(ctx context.Context, id string) (Port, error)
	GetPortByGUID(ctx context.Context, fabric string, guid *fabric.GUID) (Port, error)
	GetPortChangeRows(ctx context.Context, fabric string, portID string, guid *fabric.GUID, networkID string) ([]GetPortChangeRowsRow, error)
	GetPortsByIDOrGUID(ctx context.Context, fabric string, id string, guid *fabric.GUID) ([]Port, error)
	Heartbeat(ctx context.Context, fabric string, now *time.Time, term int64) (int64, error)
	InsertFabricState(ctx context.Context, fabric string) error
	InsertFabricLeadership(ctx context.Context, fabric string) error
	InsertFabricKubernetesState(ctx context.Context, fabric string) error
	InsertExpectedSwitch(ctx context.Context, fabric string, guid fabric.GUID, description string, now time.Time) error
	InsertConfirmedHost(ctx context.Context, arg InsertConfirmedHostParams) error
	InsertGUIDPlace(ctx context.Context, arg InsertGUIDPlaceParams) (int64, error)
	// InsertJob inserts the job and returns the id it chose (j.ID is not read).
	InsertJob(ctx context.Context, j Job) (int64, error)
	// InsertJobWithPlaces is InsertJob with the job's places, at least
	// one, in its row (PlacesJSON in the jobs' places column): one
	// statement and one row, whatever their count.
	InsertJobWithPlaces(ctx context.Context, j Job, places []Place) (int64, error)
	InsertSetFailure(ctx context.Context, portGuid string, since time.Time, term int64, fabric string) (int64, error)
	// LockJobIDs locks job_ids' row until the transaction ends: taken right
	// before InsertJob, so that two fabrics' changes never choose one id.
	LockJobIDs(ctx context.Context) error
	InsertSecondSM(ctx context.Context, arg InsertSecondSMParams) (int64, error)
	InsertSecretIfAbsent(ctx context.Context, fabric string, name string, value string, now time.Time) error
	KubernetesMembershipsOfGUID(ctx context.Context, fabric string, guid fabric.GUID) ([]KubernetesMember, error)
	CountKubernetesMembersOfPKey(ctx context.Context, fabric string, pkey fabric.PKey) (int64, error)
	CountKubernetesMembers(ctx context.Context, fabric string, owner string) (int64, error)
	InsertForeignSM(ctx context.Context, arg InsertSecondSMParams) (int64, error)
	KubernetesState(ctx context.Context, fabric string) (KubernetesStateRow, error)
	// MarkKubernetesUnchanged moves last_updated to at, never back, while every
	// Kubernetes change is applied: a change that changes nothing.
	MarkKubernetesUnchanged(ctx context.Context, at *time.Time, fabric string) (int64, error)
	LastApply(ctx context.Context, fabric string) (Apply, error)
	MarkGUIDMoved(ctx context.Context, arg MarkGUIDMovedParams) (int64, error)
	NewestJobID(ctx context.Context, fabric string) (int64, error)
	// NewestJobOf is the newest job of an object that createdBy created on
	// the fabric.
	NewestJobOf(ctx context.Context, objectID string, objectType string, fabric string, createdBy string) (Job, error)
	LastAudit(ctx context.Context, fabric string) ([]LastAuditRow, error)
	Leadership(ctx context.Context, fabric string) (LeadershipRow, error)
	ListAdoptedPartitions(ctx context.Context, fabric string) ([]AdoptedPartition, error)
	ListKubernetesMembers(ctx context.Context, fabric string) ([]KubernetesMember, error)
	ListKubernetesMembersOfPKey(ctx context.Context, fabric string, pkey fabric.PKey) ([]KubernetesMember, error)
	ListKubernetesPKeys(ctx context.Context, fabric string) ([]KubernetesPKey, error)
	ListManagedNetworks(ctx context.Context, fabric string) ([]Network, error)
	ListNetworksSince(ctx context.Context, fabric string, revision int64) ([]Network, error)
	ListPortsOfNetwork(ctx context.Context, fabric string, networkID string) ([]Port, error)
	ListPortsSince(ctx context.Context, fabric string, revision int64) ([]Port, error)
	ListSecrets(ctx context.Context, fabric string) ([]ListSecretsRow, error)
	MarkJobsRunning(ctx context.Context, fabric string, now *time.Time, revision int64, term int64) (int64, error)
	MarkKubernetesApplied(ctx context.Context, fabric string, now *time.Time, revision int64, term int64) error
	MarkKubernetesChanged(ctx context.Context, fabric string, revision int64) error
	OldestOpenJob(ctx context.Context, fabric string, status string) (time.Time, error)
	NewTerm(ctx context.Context, fabric string, holder string, now *time.Time) (int64, error)
	OpenJobsWithGUIDs(ctx context.Context, fabric string, revision int64) ([]OpenJobsWithGUIDsRow, error)
	OpenJobPlaces(ctx context.Context, fabric string, revision int64) ([]OpenJobPlacesRow, error)
	// PrincipalUsage counts createdBy's jobs of the fabric ("": of every
	// fabric) created since recent, and the bytes of the requests of those
	// created since since.
	PrincipalUsage(ctx context.Context, recent time.Time, createdBy string, since time.Time, fabric string) (PrincipalUsageRow, error)
	RecordApply(ctx context.Context, arg RecordApplyParams) (int64, error)
	RecordApplyOfHistory(ctx context.Context, arg RecordApplyOfHistoryParams) (int64, error)
	Revision(ctx context.Context, fabric string) (int64, error)
	SetFailures(ctx context.Context, fabric string) ([]SetFailure, error)
	SetJobDescription(ctx context.Context, fabric string, description string, now time.Time, jobID int64, term int64) (int64, error)
	SnapshotHead(ctx context.Context, fabric string, kept, since int64) (SnapshotHeadRow, error)
	UpsertAdoptedPartition(ctx context.Context, arg UpsertAdoptedPartitionParams) error
	UpsertKubernetesMember(ctx context.Context, arg UpsertKubernetesMemberParams) error
	UpsertKubernetesPKey(ctx context.Context, fabric string, pkey fabric.PKey, ipOverIb bool, revision int64, now time.Time, owner string) error
	SetKubernetesPartitionName(ctx context.Context, partitionName *string, fabric string, pkey fabric.PKey) error
	ListKubernetesPartitionNames(ctx context.Context, fabric string) ([]KubernetesPartitionName, error)
	SetKubernetesPKeyQoS(ctx context.Context, fabric string, mtuLimit int64, serviceLevel int64, rateLimitMbps int64, revision int64, now time.Time, pkey fabric.PKey) (int64, error)
	SecondSMs(ctx context.Context, fabric string) ([]SecondSubnetManager, error)
	SMPorts(ctx context.Context) ([]SubnetManagerPort, error)
	UpsertSMPort(ctx context.Context, fabric string, portGuid string, holder string, now time.Time) error
	SetRevision(ctx context.Context, fabric string, revision int64) error
	UpdateSecret(ctx context.Context, fabric string, value string, name string) error
	UpsertDuplicateGUID(ctx context.Context, arg UpsertDuplicateGUIDParams) (int64, error)
	UpsertEnforcementError(ctx context.Context, arg UpsertEnforcementErrorParams) (int64, error)
	// UpsertLastAudit records a as the last audit if its Term is still the
	// current term.
	UpsertLastAudit(ctx context.Context, a LastAuditRow) (int64, error)
	UpsertNetwork(ctx context.Context, arg UpsertNetworkParams) error
	UpsertPort(ctx context.Context, arg UpsertPortParams) error
}
