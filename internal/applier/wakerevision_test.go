package applier

import (
	"fmt"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// committedReads counts the reads of the revision of a store that knows the
// revisions its process committed.
type committedReads struct {
	revisionReads
	st *store.Store
}

func (s *committedReads) TakeCommitted() (int64, bool) { return s.st.TakeCommitted() }

// The loop woken by a change this process committed decides on that
// change's revision without reading it (a round trip before every apply on
// the server engines); it reads the revision when no change of its own is
// newer than the one applied, and when the term has applied none yet.
func TestLoopTakesItsOwnChangesRevision(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			ctx := t.Context()
			st := storetest.Open(t, engine)
			reads := &committedReads{revisionReads: revisionReads{Store: st}, st: st}
			term := &term{Applier: &Applier{Store: deadlineStore{store: reads, timeout: DefaultDBTimeout}}, applied: -1}
			record := func(vlan int64) store.Job {
				id := fmt.Sprintf("00000000-0000-4000-8000-%012d", vlan)
				j, err := st.RecordNetwork(ctx, store.NetworkChange{Operation: store.OpCreateNetwork,
					Network: store.NetworkSpec{ID: id, Name: id, Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &vlan}})
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
			steps := []struct {
				name    string
				change  bool  // a change is recorded first
				applied int64 // the term's applied revision
				reads   int64 // the reads of the revision it takes
			}{
				{"the term's first apply", true, -1, 1},
				{"its own change", true, 1, 0},
				{"nothing newer than applied", false, 2, 1},
				{"its own change, already applied", true, 3, 1},
			}
			for _, s := range steps {
				var want int64
				if s.change {
					want = record(102 + s.applied).Revision
				} else {
					want = s.applied
				}
				term.applied = s.applied
				before := reads.n.Load()
				rev, err := term.revision(ctx)
				if err != nil || rev != want {
					t.Errorf("%s: revision %d, %v; want %d", s.name, rev, err, want)
				}
				if n := reads.n.Load() - before; n != s.reads {
					t.Errorf("%s: %d reads of the revision, want %d", s.name, n, s.reads)
				}
			}
		})
	}
}
