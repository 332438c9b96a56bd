package applier

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// previousRelease is the store with some jobs as the previous release wrote
// them, recording no places (a rolling upgrade): a fake of rows no current
// change can write, over the real store.
type previousRelease struct {
	Store
	mu   sync.Mutex
	jobs map[int64]bool
}

func (s *previousRelease) OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error) {
	jobs, err := s.Store.OpenJobs(ctx, revision)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range jobs {
		if s.jobs[j.ID] {
			jobs[i].Places = nil
		}
	}
	return jobs, nil
}

// writtenBefore makes job one the previous release wrote.
func (r *applyRig) writtenBefore(job store.Job) store.Job {
	r.places.mu.Lock()
	defer r.places.mu.Unlock()
	r.places.jobs[job.ID] = true
	return job
}

// The hosts of the rig's subnet dump: H<n>'s node and its port 1's GUID.
func hostNode(n int) uint64      { return 0x0002c90300000000 + uint64(n)<<8 }
func hostPort(n int) fabric.GUID { return fabric.GUID(hostNode(n) + 1) }

// blockNotSent is OpenSM's ERR 0506 for H<n>: a line that names a port but
// no pkey.
func blockNotSent(n int) string {
	return logLine(0x01, fmt.Sprintf("pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x%016x port 1 (H%d)", hostNode(n), n))
}

func (r *applyRig) portIn(net, id string, g fabric.GUID) store.Job {
	r.t.Helper()
	j, err := r.st.RecordPort(r.t.Context(), store.PortChange{Operation: store.OpAddPort,
		Port: store.Port{ID: id, NetworkID: net, GUID: &g, Host: "h"}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *applyRig) vlan(net string, seg int64) store.Job {
	r.t.Helper()
	j, err := r.st.RecordNetwork(r.t.Context(), store.NetworkChange{Operation: store.OpUpdateNetwork,
		Network: store.NetworkSpec{ID: net, Name: "n", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &seg}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *applyRig) removePort(id string) store.Job {
	r.t.Helper()
	j, err := r.st.RemovePort(r.t.Context(), store.PortRemoval{PortID: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// kube is the rig's store with a Kubernetes pkey range.
func (r *applyRig) kube() *store.Store {
	return r.st.WithRules(store.Rules{KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})
}

func (r *applyRig) kubeAdd(pkey fabric.PKey, g fabric.GUID) store.Job {
	r.t.Helper()
	j, err := r.kube().AddKubernetesGUIDs(r.t.Context(), store.KubernetesAddition{PKey: pkey,
		Members: []store.KubernetesMember{{GUID: g, Membership: fabric.Full}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func wantStatus(t *testing.T, r *applyRig, name string, job store.Job, want string) store.Job {
	t.Helper()
	j := r.job(job.ID)
	if j.Status != want {
		t.Errorf("%s: %s (%s %s), want %s", name, j.Status, j.Description, j.Error, want)
	}
	return j
}

// FinishesBesideProof and FinishApplyAwaiting are the real store's
// (early.go): the rig's term on a server engine begins its jobs'
// transaction beside the read-back, as a manager's does.
func (s *previousRelease) FinishesBesideProof() bool {
	a, ok := s.Store.(awaitingFinisher)
	return ok && a.FinishesBesideProof()
}

func (s *previousRelease) FinishApplyAwaiting(ctx context.Context, a store.Apply, proof func(context.Context) *store.Proven,
	within time.Duration, open func(store.GateState) bool) (store.Finished, error) {
	return s.Store.(awaitingFinisher).FinishApplyAwaiting(ctx, a, proof, within, open)
}
