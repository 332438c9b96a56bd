package applier

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The dumps of testdata/moved: all.lst is a five-host, two-switch fabric
// (H1 behind S1 port 2, H3 behind S1 port 3); h1-down.lst the same with H1's
// link down; h3-clones-h1.lst H1 down and H3 presenting H1's GUIDs, which
// OpenSM then finds behind S1 port 3 (no duplicate: H1 is not there).
const (
	movedS1 fabric.GUID = 0x0002c90300f00001
	movedH1 fabric.GUID = 0x0002c90300000101
	movedH3 fabric.GUID = 0x0002c90300000301
	s1Port3             = "0x0002c90300f00001:3"
)

func loadMovedDump(t *testing.T, name string) *topology.Topology {
	t.Helper()
	topo, err := topology.Load(filepath.Join("testdata", "moved", name))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestMovedGUIDComparison: the reason and the writes for recorded places and
// a dump; each case fails without the comparison it names.
func TestMovedGUIDComparison(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	h1 := store.GUIDPlace{GUID: movedH1, Switch: movedS1, Port: 2, RecordedAt: at, MovedAt: at}
	h1Marked := h1
	h1Marked.MovedTo, h1Marked.MovedAt = s1Port3, at.Add(time.Minute)
	h3 := store.GUIDPlace{GUID: movedH3, Switch: movedS1, Port: 3, RecordedAt: at, MovedAt: at}
	tests := []struct {
		name    string
		places  []store.GUIDPlace
		dump    string // "": not read
		guids   []fabric.GUID
		reason  []string // what the one reason names; none: no reason
		updates []store.GUIDPlaceUpdate
	}{
		{name: "first sighting: recorded where it is", dump: "all.lst", guids: []fabric.GUID{movedH1, movedH3},
			updates: []store.GUIDPlaceUpdate{{GUID: movedH1, Switch: movedS1, Port: 2, New: true},
				{GUID: movedH3, Switch: movedS1, Port: 3, New: true}}},
		{name: "a GUID off the fabric is not recorded", dump: "h1-down.lst", guids: []fabric.GUID{movedH1}},
		{name: "at its place: nothing", places: []store.GUIDPlace{h1, h3}, dump: "all.lst", guids: []fabric.GUID{movedH1, movedH3}},
		{name: "the victim down: nothing", places: []store.GUIDPlace{h1}, dump: "h1-down.lst", guids: []fabric.GUID{movedH1}},
		{name: "the clone behind another switch port", places: []store.GUIDPlace{h1, h3}, dump: "h3-clones-h1.lst",
			guids:   []fabric.GUID{movedH1, movedH3},
			reason:  []string{MovedGUIDText, "port GUID 0x0002c90300000101 recorded behind switch port 0x0002c90300f00001:2 is behind 0x0002c90300f00001:3", "--accept-moved-guid"},
			updates: []store.GUIDPlaceUpdate{{GUID: movedH1, Switch: movedS1, Port: 2, MovedTo: s1Port3}}},
		{name: "marked already: no write, the reason stays", places: []store.GUIDPlace{h1Marked}, dump: "h3-clones-h1.lst",
			reason: []string{"0x0002c90300000101 recorded behind switch port 0x0002c90300f00001:2 is behind 0x0002c90300f00001:3"}},
		{name: "the clone flaps off: the mark holds", places: []store.GUIDPlace{h1Marked}, dump: "h1-down.lst",
			reason: []string{"was behind 0x0002c90300f00001:3 (2026-12-06T07:01:00Z), and has not been seen back since"}},
		{name: "the dump unread: the mark holds", places: []store.GUIDPlace{h1Marked},
			reason: []string{"was behind 0x0002c90300f00001:3"}},
		{name: "back at its place: the mark is cleared", places: []store.GUIDPlace{h1Marked}, dump: "all.lst",
			updates: []store.GUIDPlaceUpdate{{GUID: movedH1, Switch: movedS1, Port: 2}}},
		{name: "a GUID no longer in the partitions is still compared", places: []store.GUIDPlace{h1}, dump: "h3-clones-h1.lst",
			reason:  []string{"0x0002c90300000101 recorded behind switch port 0x0002c90300f00001:2 is behind"},
			updates: []store.GUIDPlaceUpdate{{GUID: movedH1, Switch: movedS1, Port: 2, MovedTo: s1Port3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var topo *topology.Topology
			if tc.dump != "" {
				topo = loadMovedDump(t, tc.dump)
			}
			reasons := movedReasons(tc.places, topo)
			switch {
			case len(tc.reason) == 0 && len(reasons) != 0:
				t.Errorf("reasons %q, want none", reasons)
			case len(tc.reason) > 0 && (len(reasons) != 1 || reasons[0].Kind != GateDuplicateGUID):
				t.Errorf("reasons %q, want one of kind %s", reasons, GateDuplicateGUID)
			case len(tc.reason) > 0:
				for _, w := range tc.reason {
					if !strings.Contains(reasons[0].Text, w) {
						t.Errorf("reason %q does not say %q", reasons[0].Text, w)
					}
				}
			}
			if got := placeUpdates(tc.places, topo, tc.guids); !slices.Equal(got, tc.updates) {
				t.Errorf("updates %+v, want %+v", got, tc.updates)
			}
		})
	}
}

// TestPlacedGUIDs: the GUIDs of networks, the flat and adopted partitions,
// once each; not the Kubernetes members (pods' GUIDs move with their pods)
// nor keywords.
func TestPlacedGUIDs(t *testing.T) {
	st := partitions.State{
		Networks: []partitions.Network{{PKey: 0x10, Members: []fabric.GUID{3, 1}}, {PKey: 0x11, Members: []fabric.GUID{1}}},
		Flat:     partitions.FlatPartition{PKey: 0x7ffe, Members: []fabric.GUID{2}},
		Kubernetes: []partitions.KubernetesPartition{{PKey: 0x20,
			Members: []partitions.KubernetesMember{{GUID: 9, Membership: partitions.Full}}}},
		Adopted: []partitions.Statement{{PKey: 0x30, Members: []partitions.Member{{Keyword: partitions.All}, {GUID: 4}}}},
	}
	if got, want := placedGUIDs(st), []fabric.GUID{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("placedGUIDs = %v, want %v", got, want)
	}
}

// setDump replaces the rig's subnet dump with testdata/moved's name, as
// OpenSM rewrites it at a SUBNET UP.
func (r *applyRig) setDump(name string) {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "moved", name))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(r.dump, data, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// TestMovedGUIDHoldsJobs: H1's port is applied, its switch port recorded.
// H1 goes down and H3 presents H1's GUID: the next sweep holds every job,
// naming the GUID and both switch ports, and --status's gates say the same;
// the clone flapping off opens nothing; a new term still holds them; the
// victim back at its place opens the gate; a recabling accepted opens it.
func TestMovedGUIDHoldsJobs(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	ctx := t.Context()
	r.network(101)
	h1 := r.port("port-h1", uint64(movedH1))
	r.applied("H1's port")
	if j := r.job(h1.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's job before the clone: %+v", j)
	}
	places, err := r.st.GUIDPlaces(ctx)
	if err != nil || len(places) != 1 || places[0].SwitchPort() != "0x0002c90300f00001:2" {
		t.Fatalf("places after H1's sweep = %+v, %v; want H1 behind S1 port 2", places, err)
	}
	gates := Gates{Store: r.st, SubnetDump: r.dump}
	const named = "port GUID 0x0002c90300000101 recorded behind switch port 0x0002c90300f00001:2"
	held := func(what string, id int64) {
		t.Helper()
		j := r.job(id)
		if j.Status == store.StatusCompleted || !strings.Contains(j.Description, MovedGUIDText) || !strings.Contains(j.Description, named) {
			t.Fatalf("%s: job %+v; want it held, naming H1's GUID", what, j)
		}
		reasons, err := gates.Closed(ctx)
		if err != nil || len(reasons) != 1 || reasons[0].Kind != GateDuplicateGUID || !strings.Contains(reasons[0].Text, named) {
			t.Fatalf("%s: the gates (--status, afm_gate_closed) say %q, %v; want duplicate_guid naming H1", what, reasons, err)
		}
	}

	r.setDump("h3-clones-h1.lst")
	h5 := r.port("port-h5", 0x0002c90300000501) // another tenant's
	r.applied("a sweep with H1's GUID behind H3's switch port")
	held("the clone", h5.ID)

	r.setDump("h1-down.lst") // the clone's link down
	h5b := r.port("port-h5b", 0x0002c90300000502)
	r.applied("a sweep without the GUID")
	held("the clone flapped off", h5b.ID)

	r.term.gate.places = placeWatch{} // a new term's view: what the database holds
	h5c := r.port("port-h5c", 0x0002c90300000503)
	r.applied("a new term's sweep")
	held("a new term", h5c.ID)

	r.setDump("all.lst") // H1 back, the clone gone
	r.port("port-h5d", 0x0002c90300000504)
	r.applied("H1 back at its switch port")
	if j := r.job(h5.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H5's job with H1 back: %+v; want completed", j)
	}
	if reasons, err := gates.Closed(ctx); err != nil || len(reasons) != 0 {
		t.Fatalf("the gates with H1 back: %q, %v; want open", reasons, err)
	}

	// H1 recabled to S1 port 3 (the dump's H3 line, now H1's): held until
	// accepted.
	r.setDump("h3-clones-h1.lst")
	h5e := r.port("port-h5e", 0x0002c90300000505)
	r.applied("H1 recabled")
	held("H1 recabled", h5e.ID)
	if err := r.st.AcceptGUIDPlaces(ctx, []store.GUIDPlace{{GUID: movedH1, Switch: movedS1, Port: 3}}); err != nil {
		t.Fatal(err)
	}
	r.port("port-h5f", 0x0002c90300000506)
	r.applied("the move accepted")
	if j := r.job(h5e.ID); j.Status != store.StatusCompleted {
		t.Fatalf("the job held by the recabling, once accepted: %+v; want completed", j)
	}
}

// cancellingStore cancels the apply's context as the GUIDs' places are
// recorded: the window between reading the dump and recording what it says.
type cancellingStore struct {
	Store
	cancel context.CancelFunc
}

func (s *cancellingStore) RecordGUIDPlaces(ctx context.Context, term int64, seen []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error) {
	s.cancel()
	return s.Store.RecordGUIDPlaces(ctx, term, seen)
}

// TestMovedGUIDUnrecordedCompletesNothing: a context cancelled between the
// dump's read and the record: nothing completes (a GUID moved since the last
// record would go unjudged), nothing is recorded; the next apply records
// the move and holds the job.
func TestMovedGUIDUnrecordedCompletesNothing(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.network(101)
	r.port("port-h1", uint64(movedH1))
	r.applied("H1's port")
	r.setDump("h3-clones-h1.lst")
	job := r.port("port-h5", 0x0002c90300000501)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	real := r.term.Store
	r.term.Store = &cancellingStore{Store: real, cancel: cancel}
	if res := r.term.apply(ctx); res == applyDone {
		t.Errorf("apply with its context cancelled while recording: %v, want a retry", res)
	}
	if j := r.job(job.ID); j.Status == store.StatusCompleted {
		t.Fatalf("the job completed although the move could not be recorded: %+v", j)
	}
	if places, err := r.st.GUIDPlaces(t.Context()); err != nil || len(places) != 1 || places[0].MovedTo != "" {
		t.Fatalf("places after the cancelled record = %+v, %v; want H1 unmarked", places, err)
	}
	r.term.Store = real
	r.applied("the next apply")
	if j := r.job(job.ID); j.Status == store.StatusCompleted || !strings.Contains(j.Description, MovedGUIDText) {
		t.Fatalf("the job after the next apply: %+v; want it held by the moved GUID", j)
	}
}

// countingStore counts the calls for the GUIDs' places.
type countingStore struct {
	Store
	calls int
}

func (s *countingStore) RecordGUIDPlaces(ctx context.Context, term int64, seen []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error) {
	s.calls++
	return s.Store.RecordGUIDPlaces(ctx, term, seen)
}

func (s *countingStore) GUIDPlaces(ctx context.Context) ([]store.GUIDPlace, error) {
	s.calls++
	return s.Store.GUIDPlaces(ctx)
}

// TestRecordPlacesSkipsOnlyWhatIsSettled: a sweep with the same dump and
// state as the last record, nothing moved or marked, costs no database
// call; a mark is cleared even then, once its GUID is back.
func TestRecordPlacesSkipsOnlyWhatIsSettled(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	ctx := t.Context()
	counting := &countingStore{Store: r.term.Store}
	r.term.Store = counting
	st := partitions.State{Revision: 5, Networks: []partitions.Network{{PKey: 0x65, Members: []fabric.GUID{movedH1}}}}
	all := dumpRead{topo: loadMovedDump(t, "all.lst")}
	if _, err := r.term.recordPlaces(ctx, st, all); err != nil {
		t.Fatal(err)
	}
	first := counting.calls
	if places, err := r.term.recordPlaces(ctx, st, all); err != nil || counting.calls != first || len(places) != 1 {
		t.Fatalf("the same sweep again: %+v, %v, %d calls after %d; want H1's place and no call", places, err, counting.calls, first)
	}
	clone := dumpRead{topo: loadMovedDump(t, "h3-clones-h1.lst")}
	if places, err := r.term.recordPlaces(ctx, st, clone); err != nil || len(places) != 1 || places[0].MovedTo != s1Port3 {
		t.Fatalf("the clone: %+v, %v; want H1 marked", places, err)
	}
	// The dump the last record compared, H1 back in it: the view is what
	// the last record read (a term that compared this dump before the mark).
	r.term.gate.places.topo = all.topo
	if places, err := r.term.recordPlaces(ctx, st, all); err != nil || len(places) != 1 || places[0].MovedTo != "" {
		t.Fatalf("H1 back, same dump and state as the view's: %+v, %v; want the mark cleared", places, err)
	}
}

// BenchmarkRecordPlacesLargeFabric is what a sweep pays for the GUIDs'
// places on a fabric of 1,500 hosts, none moved, on SQLite: settled, every
// GUID recorded (the state's revision is new at each apply, the dump the
// same); newhost, each apply brings one host's port that was not recorded
// (an enrollment's change), so one place is written: the first 1,000
// iterations (-benchtime 1000x at most; new/op says how many were).
func BenchmarkRecordPlacesLargeFabric(b *testing.B) {
	const hosts = 1500
	for _, newHost := range []bool{false, true} {
		name := "settled"
		if newHost {
			name = "newhost"
		}
		b.Run(name, func(b *testing.B) {
			r := newApplyRig(b, false, func() string { return heavySweep("") })
			dump, _ := largeDump(hosts, 40)
			topo, err := topology.Parse(strings.NewReader(dump))
			if err != nil {
				b.Fatal(err)
			}
			guid := func(i int) fabric.GUID { return fabric.GUID(0x0002c90300000001 + uint64(i)*0x100) }
			st := partitions.State{Networks: []partitions.Network{{PKey: 0x65}}}
			first := hosts
			if newHost {
				first = hosts - 1000
			}
			for i := 1; i <= first; i++ {
				st.Networks[0].Members = append(st.Networks[0].Members, guid(i))
			}
			ctx := b.Context()
			if places, err := r.term.recordPlaces(ctx, st, dumpRead{topo: topo}); err != nil || len(places) != first {
				b.Fatalf("first record: %d places, %v", len(places), err)
			}
			next := first + 1
			for b.Loop() {
				st.Revision++
				if newHost && next <= hosts {
					st.Networks[0].Members = append(st.Networks[0].Members, guid(next))
					next++
				}
				if _, err := r.term.recordPlaces(ctx, st, dumpRead{topo: topo}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(next-first-1)/float64(b.N), "new/op")
		})
	}
}

// TestAddPlacesReadsBackWhatAnotherRecorded: the term's view lacks a place an
// operator accepted meanwhile (behind S1's port 7); the sweep finds H1 behind
// port 2 and adds it as a first place, which the database refuses (a first
// place never overwrites one). The term reads the places back instead of
// trusting its own, and so sees H1 moved from its accepted place.
func TestAddPlacesReadsBackWhatAnotherRecorded(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	ctx := t.Context()
	r.term.gate.places = placeWatch{read: true} // read before the accept: nothing recorded then
	if err := r.st.AcceptGUIDPlaces(ctx, []store.GUIDPlace{{GUID: movedH1, Switch: movedS1, Port: 7}}); err != nil {
		t.Fatal(err)
	}
	st := partitions.State{Revision: 5, Networks: []partitions.Network{{PKey: 0x65, Members: []fabric.GUID{movedH1}}}}
	all := dumpRead{topo: loadMovedDump(t, "all.lst")}
	places, err := r.term.recordPlaces(ctx, st, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(places) != 1 || places[0].Port != 7 {
		t.Fatalf("places after the refused first place = %+v; want H1's accepted place, S1 port 7", places)
	}
	if reasons := movedReasons(places, all.topo); len(reasons) != 1 {
		t.Fatalf("moved reasons = %v; want H1 behind port 2 named", reasons)
	}
}
