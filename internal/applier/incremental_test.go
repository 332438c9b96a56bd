package applier

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// staticTemplate is the built-in template's layout with a static partition
// whose pkey and member the random changes collide with (storetest's
// ChangeWorld).
const staticTemplate = `# revision {{ revision }}
{{ default_partition }}
storage=0x1010, ipoib : 0x0002c90300001039=full ;
{% for network in networks %}
{{ network.name }}={{ network.pkey }}{{ network.flags }} :{{ network.members_text }} ;
{% endfor %}
{{ flat.name }}={{ flat.pkey }}{{ flat.flags }} :{{ flat.members_text }} ;
{% for partition in kubernetes %}
{{ partition.name }}={{ partition.pkey }}{{ partition.flags }} :{{ partition.members_text }} ;
{% endfor %}
{% for partition in adopted %}
{{ partition.text }}
{% endfor %}
`

// Every file the term writes from its incremental snapshot is, byte for byte,
// the file a full read of the database renders: random sequences of changes
// (flat and VLAN networks, unmanaged ones, deletions under their ports, GUIDs
// moving between ports and to Kubernetes, Kubernetes pkeys, partitions
// adopted and released, a template's static partition), each followed by an
// apply, on every engine. The drift
// check, which reads everything, agrees.
func TestIncrementalApplyIsTheFullRender(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			tpl, err := partitions.ParseTemplate("static.j2", []byte(staticTemplate))
			if err != nil {
				t.Fatal(err)
			}
			r := newApplyRigOn(t, engine, true, func() string { return heavySweep("") })
			ctx := t.Context()
			static, err := tpl.Static(ctx, r.term.Cfg.DefaultPartition, r.term.Cfg.FlatPKey)
			if err != nil {
				t.Fatal(err)
			}
			s := r.st.WithRules(store.Rules{PhysicalNetworks: []string{"ibnet"}, FlatPKey: store.DefaultFlatPKey,
				StaticPKey: static.Name, StaticMember: static.Listing,
				KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})
			r.term.Cfg.Template = tpl
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rnd := rand.New(rand.NewPCG(seed, seed>>1))
			w := storetest.NewChangeWorld()
			w.Networks(t, s)
			for step := range 80 {
				for range 1 + rnd.IntN(3) {
					w.Change(t, s, rnd)
				}
				if res := r.term.apply(ctx); res != applyDone {
					t.Fatalf("step %d: apply: %v", step, res)
				}
				snap, err := r.st.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				full, err := Render(ctx, snap, r.term.Cfg.RenderInput())
				if err != nil || full.Problems != nil {
					t.Fatalf("step %d: full render: %v, %v", step, err, full.Problems)
				}
				want := full.Text
				got, err := os.ReadFile(r.term.Cfg.PartitionsFile)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("step %d (seed %d): the file written\n%s\nis not the full render\n%s", step, seed, got, want)
				}
				if step%10 == 9 {
					if reason := r.term.newDriftRepair().fileDrift(ctx, r.term.written); reason != "" {
						t.Fatalf("step %d: the drift check finds %q", step, reason)
					}
				}
			}
		})
	}
}
