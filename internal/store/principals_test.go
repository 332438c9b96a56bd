package store

import (
	"reflect"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestKubernetesConflictsJudgeEachPKeyByItsOwner: at start, a recorded pkey
// is judged by its own client's range, and one of a client no longer
// configured is named, so that the start refuses it.
func TestKubernetesConflictsJudgeEachPKeyByItsOwner(t *testing.T) {
	r := Rules{KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff},
		PKeysClients: map[string]PKeysClientRules{"nico": {Range: fabric.PKeyRange{First: 0x2000, Last: 0x2fff}}}}
	pkeys := []KubernetesPKey{{PKey: 0x1001}, {PKey: 0x2001, Owner: "nico"}, {PKey: 0x2002},
		{PKey: 0x1002, Owner: "nico"}, {PKey: 0x3001, Owner: "slurm"}}
	want := []string{
		"Kubernetes pkey 0x2002 is outside [ufm_pkeys] pkey_range 0x1000-0x1fff, the only pkeys Kubernetes may use",
		"Kubernetes pkey 0x1002 is outside [ufm_pkeys:nico] pkey_range 0x2000-0x2fff, the only pkeys Kubernetes may use",
		"Kubernetes pkey 0x3001 is pkeys client slurm's, which is no longer configured ([ufm_pkeys:slurm])",
	}
	if got := r.KubernetesConflicts(pkeys); !reflect.DeepEqual(got, want) {
		t.Errorf("conflicts:\n got %q\nwant %q", got, want)
	}
}
