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
	BumpRevision(ctx context.Context) (int64, error)
	ClearEnforcementErrors(ctx context.Context) (int64, error)
	ClearGUIDsOfNetwork(ctx context.Context, revision int64, now time.Time, networkID string) (int64, error)
	CompleteJob(ctx context.Context, now *time.Time, jobID int64, revision int64, term int64) (int64, error)
	CompleteJobs(ctx context.Context, now *time.Time, revision int64, term int64) (int64, error)
	CountJobsByStatus(ctx context.Context) ([]CountJobsByStatusRow, error)
	DeleteAppliesBefore(ctx context.Context, keepFrom int64, before time.Time, batch int64, term int64) (int64, error)
	DeleteAdoptedPartition(ctx context.Context, pkey fabric.PKey) (int64, error)
	DeleteExpectedSwitches(ctx context.Context) error
	DeleteFinishedJobsBefore(ctx context.Context, before *time.Time, batch int64, term int64) (int64, error)
	DeleteKubernetesMember(ctx context.Context, pkey fabric.PKey, guid fabric.GUID) (int64, error)
	DeleteKubernetesMembersOfPKey(ctx context.Context, pkey fabric.PKey) (int64, error)
	DeleteKubernetesPKey(ctx context.Context, pkey fabric.PKey) (int64, error)
	DeleteNetwork(ctx context.Context, id string) (int64, error)
	DeletePort(ctx context.Context, id string) (int64, error)
	DeletePortsOfNetwork(ctx context.Context, networkID string) (int64, error)
	DeleteSecondSMs(ctx context.Context, term int64) (int64, error)
	DescribeOpenJobs(ctx context.Context, reason string, now time.Time, revision int64, term int64) (int64, error)
	EnforcementErrors(ctx context.Context) ([]EnforcementError, error)
	ExpectedSwitches(ctx context.Context) ([]ExpectedSwitch, error)
	FailJob(ctx context.Context, error string, now *time.Time, jobID int64, term int64) (int64, error)
	FailJobs(ctx context.Context, error string, now *time.Time, revision int64, term int64) (int64, error)
	CountMembers(ctx context.Context) (int64, error)
	CountMembersByNetwork(ctx context.Context) ([]CountMembersByNetworkRow, error)
	CountNetworks(ctx context.Context) (int64, error)
	FirstApplyToKeep(ctx context.Context) (int64, error)
	GateSwitches(ctx context.Context) ([]GateSwitchesRow, error)
	GetJob(ctx context.Context, id int64) (Job, error)
	GetKubernetesPKey(ctx context.Context, pkey fabric.PKey) (KubernetesPKey, error)
	GetNetwork(ctx context.Context, id string) (Network, error)
	GetNetworkByPKey(ctx context.Context, pkey *fabric.PKey) (Network, error)
	GetPort(ctx context.Context, id string) (Port, error)
	GetPortByGUID(ctx context.Context, guid *fabric.GUID) (Port, error)
	GetPortChangeRows(ctx context.Context, portID string, guid *fabric.GUID, networkID string) ([]GetPortChangeRowsRow, error)
	GetPortsByIDOrGUID(ctx context.Context, id string, guid *fabric.GUID) ([]Port, error)
	Heartbeat(ctx context.Context, now *time.Time, term int64) (int64, error)
	InsertExpectedSwitch(ctx context.Context, guid fabric.GUID, description string, now time.Time) error
	// InsertJob inserts the job and returns the id it chose (j.ID is not read).
	InsertJob(ctx context.Context, j Job) (int64, error)
	InsertSecondSM(ctx context.Context, arg InsertSecondSMParams) (int64, error)
	InsertSecretIfAbsent(ctx context.Context, name string, value string, now time.Time) error
	KubernetesMembershipsOfGUID(ctx context.Context, guid fabric.GUID) ([]KubernetesMember, error)
	CountKubernetesMembersOfPKey(ctx context.Context, pkey fabric.PKey) (int64, error)
	CountKubernetesMembers(ctx context.Context) (int64, error)
	KubernetesState(ctx context.Context) (KubernetesStateRow, error)
	LastApply(ctx context.Context) (Apply, error)
	NewestJobID(ctx context.Context) (int64, error)
	LastAudit(ctx context.Context) ([]LastAuditRow, error)
	Leadership(ctx context.Context) (LeadershipRow, error)
	ListAdoptedPartitions(ctx context.Context) ([]AdoptedPartition, error)
	ListKubernetesMembers(ctx context.Context) ([]KubernetesMember, error)
	ListKubernetesMembersOfPKey(ctx context.Context, pkey fabric.PKey) ([]KubernetesMember, error)
	ListKubernetesPKeys(ctx context.Context) ([]KubernetesPKey, error)
	ListManagedNetworks(ctx context.Context) ([]Network, error)
	ListNetworksSince(ctx context.Context, revision int64) ([]Network, error)
	ListPortsOfNetwork(ctx context.Context, networkID string) ([]Port, error)
	ListPortsSince(ctx context.Context, revision int64) ([]Port, error)
	ListSecrets(ctx context.Context) ([]ListSecretsRow, error)
	MarkJobsRunning(ctx context.Context, now *time.Time, revision int64, term int64) (int64, error)
	MarkKubernetesApplied(ctx context.Context, now *time.Time, revision int64, term int64) (int64, error)
	MarkKubernetesChanged(ctx context.Context, revision int64) error
	OldestOpenJob(ctx context.Context, status string) (time.Time, error)
	NewTerm(ctx context.Context, holder string, now *time.Time) (int64, error)
	OpenJobsWithGUIDs(ctx context.Context, revision int64) ([]OpenJobsWithGUIDsRow, error)
	RecordApply(ctx context.Context, arg RecordApplyParams) (int64, error)
	Revision(ctx context.Context) (int64, error)
	SetJobDescription(ctx context.Context, description string, now time.Time, jobID int64, term int64) (int64, error)
	UpsertAdoptedPartition(ctx context.Context, arg UpsertAdoptedPartitionParams) error
	UpsertKubernetesMember(ctx context.Context, arg UpsertKubernetesMemberParams) error
	UpsertKubernetesPKey(ctx context.Context, pkey fabric.PKey, ipOverIb bool, revision int64, now time.Time) error
	SecondSMs(ctx context.Context) ([]SecondSubnetManager, error)
	SetRevision(ctx context.Context, revision int64) error
	UpdateSecret(ctx context.Context, value string, name string) error
	UpsertEnforcementError(ctx context.Context, arg UpsertEnforcementErrorParams) (int64, error)
	// UpsertLastAudit records a as the last audit if its Term is still the
	// current term.
	UpsertLastAudit(ctx context.Context, a LastAuditRow) (int64, error)
	UpsertNetwork(ctx context.Context, arg UpsertNetworkParams) error
	UpsertPort(ctx context.Context, arg UpsertPortParams) error
}
