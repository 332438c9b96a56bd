package applier

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestRenderResult holds Render to its contract: the file's problems are the
// result's, the error only a context that ended before the verdict.
func TestRenderResult(t *testing.T) {
	in := RenderInput{DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;", FlatPKey: store.DefaultFlatPKey}
	h1 := fabric.GUID(0x0002c90300000101)
	h2 := fabric.GUID(0x0002c90300000201)
	snap := func(flat fabric.GUID) store.Snapshot {
		pkey := fabric.PKey(0x0065)
		return store.Snapshot{Revision: 7,
			Networks: []store.Network{{ID: "net-a", PKey: &pkey, Managed: true}, {ID: "net-flat", Managed: true}},
			Members:  []store.Member{{NetworkID: "net-a", GUID: h1}, {NetworkID: "net-flat", GUID: flat}}}
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		snap     store.Snapshot
		err      error  // Render's own
		problems bool   // the result's
		text     string // in the file, when it has no problems
	}{
		{name: "clean", ctx: t.Context(), snap: snap(h2), text: "net-0065-"},
		{name: "a port in a network and the flat partition fails the check", ctx: t.Context(), snap: snap(h1), problems: true},
		{name: "cancelled", ctx: cancelled, snap: snap(h2), err: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render(tc.ctx, tc.snap, in)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if (r.Problems != nil) != tc.problems {
				t.Fatalf("problems %v, want some: %v", r.Problems, tc.problems)
			}
			if r.State.Revision != tc.snap.Revision {
				t.Errorf("state of revision %d, want %d", r.State.Revision, tc.snap.Revision)
			}
			if !tc.problems && !strings.Contains(string(r.Text), tc.text) {
				t.Errorf("file\n%s\nwithout %q", r.Text, tc.text)
			}
		})
	}
}
