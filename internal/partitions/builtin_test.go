package partitions

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// engineBuiltin is the built-in template's text run by the template engine,
// as a copy of it in [opensm] partitions_template is.
func engineBuiltin(t testing.TB) *Template {
	t.Helper()
	tpl, err := ParseTemplate("built-in, by the engine", builtinText)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// builtinStates are states of every kind the built-in template writes:
// networks, the flat partition, Kubernetes partitions (with and without
// IPoIB, index 0 and QoS), adopted partitions with an owner and without one,
// IDs and a default partition with what an HTML-escaping or a template's
// syntax would change.
func builtinStates(t *testing.T) map[string]State {
	states := map[string]State{
		"empty":             {Revision: 1, DefaultPartition: defaultPartition, Flat: flat},
		"check":             checkState(),
		"kubernetes":        kubernetesState(fabric.Upstream),
		"kubernetes nvidia": kubernetesState(fabric.NVIDIA),
		"odd": {Revision: -5, DefaultPartition: "Default=0x7fff : ALL=limited, SELF=full ; # <&>'\" {{ x }}",
			Networks: []Network{{ID: "a b:c;d=e,f#g <&>{{", PKey: 0x0010, Members: []fabric.GUID{1}}, {ID: "réseau", PKey: 0x0011}},
			Flat:     flat},
	}
	qos := kubernetesState(fabric.NVIDIA)
	qos.Kubernetes[1].QoS = fabric.QoS{MTULimit: 4, ServiceLevel: 3, RateMbps: 200000}
	states["kubernetes qos"] = qos
	adopted := checkState()
	adopted.Adopted = planOf(t, runningFile).Adopt
	states["adopted"] = adopted
	owned := checkState()
	owned.Adopted = planOf(t, runningFile).Adopt
	owned.Networks = append(owned.Networks, Network{ID: "owner", PKey: 0x0010, Members: []fabric.GUID{0x0002c90300000005}})
	states["adopted owned"] = owned
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range [][2]int{{1, 0}, {3, 5}, {10, 14}, {40, 400}} {
		states[fmt.Sprintf("random %d networks %d ports", size[0], size[1])] = randomState(rng, size[0], size[1])
	}
	return states
}

// The built-in template is written without the template engine
// (writeBuiltin): what it writes must be what the engine renders of the
// template's text, byte for byte, refusals included.
func TestBuiltinWrittenAsRendered(t *testing.T) {
	engine := engineBuiltin(t)
	for name, s := range builtinStates(t) {
		t.Run(name, func(t *testing.T) {
			got, gotErr := BuiltinTemplate().Render(context.Background(), s)
			want, wantErr := engine.Render(context.Background(), s)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("errors: %v, the engine's %v", gotErr, wantErr)
			}
			if gotErr != nil {
				t.Errorf("render: %v", gotErr) // each of these states is a file
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("written:\n%s\nthe engine rendered:\n%s", got, want)
			}
		})
	}
}

// A change's apply renders the built-in template: written without the
// template engine, it costs a fraction of the engine's allocations (and of
// its time, BenchmarkRenderCheck).
func TestBuiltinCostsLessThanTheEngine(t *testing.T) {
	s := randomState(rand.New(rand.NewPCG(3, 4)), 10, 14)
	allocs := func(tpl *Template) float64 {
		return testing.AllocsPerRun(20, func() {
			if _, err := tpl.Render(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		})
	}
	builtin, engine := allocs(BuiltinTemplate()), allocs(engineBuiltin(t))
	if builtin*2 > engine {
		t.Fatalf("the built-in template's render allocates %.0f times, the engine's %.0f: want under half", builtin, engine)
	}
}

// A render whose context has ended gives no file, as the engine's.
func TestBuiltinWriteCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if out, err := BuiltinTemplate().Render(ctx, checkState()); err == nil || out != nil {
		t.Fatalf("Render with an ended context: %d bytes, %v", len(out), err)
	}
}
