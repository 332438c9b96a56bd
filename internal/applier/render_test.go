package applier

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
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

// When a network takes an adopted partition over, the file writes the
// network's flags; the applier's render warns once a term, naming the pkey,
// the adopted partition and which flags changed (the adopted mtu=4
// dropped), and says nothing of an adopted partition no owner has.
func TestLogReplacedFlags(t *testing.T) {
	ctx := t.Context()
	s := storetest.Open(t, config.EngineSQLite)
	var adopt store.Adoption
	for _, text := range []string{"tenant_a=0x0010, ipoib, mtu=4 : 0x0002c90300000a01=full ;",
		"tenant_b=0x0020, mtu=4 : 0x0002c90300000a02=full ;"} {
		st, err := partitions.ParseStatement(text)
		if err != nil {
			t.Fatal(err)
		}
		adopt.Partitions = append(adopt.Partitions, st)
	}
	if _, err := s.AdoptPartitions(ctx, adopt); err != nil {
		t.Fatal(err)
	}
	vlan := int64(0x10)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Operation: store.OpCreateNetwork, Network: store.NetworkSpec{
		ID: "net-a", Type: store.TypeVLAN, PhysicalNetwork: "ibnet", SegmentationID: &vlan}}); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	tm := &term{Applier: &Applier{Store: s, Log: slog.New(slog.NewTextHandler(&log, nil)), Cfg: Config{
		DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;", FlatPKey: store.DefaultFlatPKey}}}
	for range 2 { // the second apply's render: said already
		if r, _, err := tm.render(ctx); err != nil || r.Problems != nil {
			t.Fatalf("render: %v, %v", err, r.Problems)
		}
	}
	want := `level=WARN msg="an owner's flags replace an adopted partition's" pkey=0x0010 adopted=tenant_a partition=net-0010-net-a flags="mtu=4 dropped"`
	if got := strings.Count(log.String(), "level=WARN"); got != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("log:\n%s\nwant one warning: %s", log.String(), want)
	}
	if strings.Contains(log.String(), "tenant_b") {
		t.Errorf("log names the adopted partition no owner has:\n%s", log.String())
	}
}
