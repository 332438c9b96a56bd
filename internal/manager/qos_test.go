package manager

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// OpenSM starts with qos on only when a client set some pkey's QoS: a pkey
// ib-kubernetes created (no QoS) leaves it off, one with a QoS turns it on.
func TestAnyQoSSet(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite).WithRules(store.Rules{
		KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})
	ctx := t.Context()
	want := func(on bool) {
		t.Helper()
		if got, err := anyQoSSet(ctx, st); err != nil || got != on {
			t.Fatalf("anyQoSSet = %v, %v; want %v", got, err, on)
		}
	}
	want(false)
	add := store.KubernetesAddition{PKey: 0x1005, CreatedBy: "ib-kubernetes", Request: "{}",
		Members: []store.KubernetesMember{{GUID: 0x0002c90300000101, Membership: fabric.Full}}}
	if _, err := st.AddKubernetesGUIDs(ctx, add); err != nil {
		t.Fatal(err)
	}
	want(false)
	sl := 4
	if _, err := st.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: 0x1005, QoS: store.QoSChange{ServiceLevel: &sl}}); err != nil {
		t.Fatal(err)
	}
	want(true)
}
