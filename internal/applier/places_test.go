package applier

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// recordedPlaces is a fake of the store's record of each job's places
// (store.OpenJob.Places, filled by the change's own transaction): the real
// store, whose OpenJobs gets, for a job it returns without places, the
// places the test said the job's change recorded (promise). A job the test
// said nothing of is left as the store returns it, as a job the previous
// release wrote.
type recordedPlaces struct {
	Store
	mu     sync.Mutex
	places map[int64][]store.Place
}

func (s *recordedPlaces) OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error) {
	jobs, err := s.Store.OpenJobs(ctx, revision)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range jobs {
		if len(j.Places) == 0 {
			jobs[i].Places = s.places[j.ID]
		}
	}
	return jobs, nil
}

// promise says what job's change recorded: its places, and what each must
// hold.
func (r *applyRig) promise(job store.Job, places ...store.Place) store.Job {
	r.places.mu.Lock()
	defer r.places.mu.Unlock()
	r.places.places[job.ID] = append(r.places.places[job.ID], places...)
	return job
}

func placeFull(g fabric.GUID, pkey fabric.PKey) store.Place {
	return store.Place{GUID: g, PKey: pkey, Want: store.WantFull}
}

func placeAbsent(g fabric.GUID, pkey fabric.PKey) store.Place {
	return store.Place{GUID: g, PKey: pkey, Want: store.WantAbsent}
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
	return r.promise(j, placeFull(g, pkey))
}

func wantStatus(t *testing.T, r *applyRig, name string, job store.Job, want string) store.Job {
	t.Helper()
	j := r.job(job.ID)
	if j.Status != want {
		t.Errorf("%s: %s (%s %s), want %s", name, j.Status, j.Description, j.Error, want)
	}
	return j
}
