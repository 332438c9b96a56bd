package applier

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// finishCalls is the term's store, saying which jobs' transactions ran: the
// one begun beside the read-back (early.go) and how it ended, and the one
// after the proof.
type finishCalls struct {
	*previousRelease
	mu       sync.Mutex
	awaiting []error
	after    int // FinishApply's and FinishApplyProven's calls
	// failRecord: every record of enforcement errors fails.
	failRecord bool
}

func (s *finishCalls) RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error {
	if s.failRecord {
		return errors.New("the database is away")
	}
	return s.previousRelease.RecordEnforcementErrors(ctx, term, seen)
}

func (s *finishCalls) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	s.mu.Lock()
	s.after++
	s.mu.Unlock()
	return s.previousRelease.FinishApply(ctx, a, open)
}

func (s *finishCalls) FinishApplyProven(ctx context.Context, a store.Apply, p store.Proven,
	open func(store.GateState) bool) (store.Finished, error) {
	s.mu.Lock()
	s.after++
	s.mu.Unlock()
	return s.previousRelease.FinishApplyProven(ctx, a, p, open)
}

func (s *finishCalls) FinishApplyAwaiting(ctx context.Context, a store.Apply, proof func(context.Context) *store.Proven,
	within time.Duration, open func(store.GateState) bool) (store.Finished, error) {
	f, err := s.previousRelease.FinishApplyAwaiting(ctx, a, proof, within, open)
	s.mu.Lock()
	s.awaiting = append(s.awaiting, err)
	s.mu.Unlock()
	return f, err
}

// duringReads is a tableReader that runs during once, as the reads begin.
type duringReads struct {
	*silentPorts
	once   sync.Once
	during func()
}

func (d *duringReads) Read(ctx context.Context, targets []pkeyread.Target) []pkeyread.Result {
	d.once.Do(d.during)
	return d.silentPorts.Read(ctx, targets)
}

// TestFinishBesideTheReadBack: on PostgreSQL and MariaDB a clean sweep's
// jobs' transaction begins beside the read-back and completes the proven
// job. What would have made finish after the proof decide otherwise rolls
// it back, nothing recorded, and the apply is finished as before: an
// enforcement entry OpenSM logged during the reads holds the job, as it
// always did; a proof that proves nothing leaves it waiting.
func TestFinishBesideTheReadBack(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		for _, tc := range []struct {
			name    string
			during  string // logged by OpenSM as the reads begin
			silent  bool   // the port never answers
			want    string // the job's status
			says    string // in its description
			early   error  // how the transaction begun beside ended
			after   int    // transactions after the proof
			applied bool   // the apply's row is recorded
			// capacity: H1's switch port's table is full (the default
			// partition and the network's); unrecorded: its finding
			// cannot be recorded, and the apply is retried.
			capacity, unrecorded bool
		}{
			{name: "clean", want: store.StatusCompleted, applied: true},
			{name: "an enforcement entry during the reads", during: logLine(0x01, "pkey_mgr_update_peer_port: ERR 0507: "+
				"Not enough pkey entries (60 <= 60) on switch 0x0002c90300f00001 port 2 (S1). Clearing Enforcement bit"),
				want: store.StatusRunning, says: "enforcement", early: store.ErrNoProof, after: 1, applied: true},
			{name: "a full switch port's finding", capacity: true, want: store.StatusRunning, says: EnforcementCleared,
				early: store.ErrNoProof, after: 1, applied: true},
			{name: "a full switch port's finding not recorded", capacity: true, unrecorded: true, want: store.StatusRunning,
				early: store.ErrNoProof},
			{name: "a proof of nothing", silent: true, want: store.StatusRunning, says: "port " + hostPort(1).String(),
				early: store.ErrNoProof},
		} {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				r := newApplyRigOn(t, engine, false, func() string { return heavySweep("") })
				if err := os.WriteFile(r.dump, []byte(wideDump(1)), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := r.st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"}}); err != nil {
					t.Fatal(err)
				}
				r.term.Cfg.Readback = &pkeyread.Reader{} // verify = tables; the fake reads
				r.term.Cfg.VerifyTimeout = time.Hour
				fake := &silentPorts{silent: map[fabric.GUID]bool{}, portTimeout: 100 * time.Millisecond}
				r.term.readTables = fake
				r.network(101)
				r.applied("the network")
				calls := &finishCalls{previousRelease: r.places, failRecord: tc.unrecorded}
				r.term.Store = calls
				if tc.capacity {
					r.term.Cfg.PortLimit = &topology.PortLimit{DumpFile: r.dump, Capacity: 2}
				}
				job := r.portIn(r.netID, "port-h1", hostPort(1))
				fake.silent[hostPort(1)] = tc.silent
				r.term.readTables = &duringReads{silentPorts: fake, during: func() {
					if tc.during != "" {
						if err := opensmtest.Append(r.sm.log, tc.during); err != nil {
							t.Error(err)
						}
					}
				}}
				before, _ := r.st.LastApply(t.Context())
				want := applyDone
				if tc.unrecorded {
					want = applyRetry
				}
				if res := r.term.apply(t.Context()); res != want {
					t.Fatalf("apply: %v; want %v", res, want)
				}
				j := wantStatus(t, r, tc.name, job, tc.want)
				if !strings.Contains(j.Description, tc.says) {
					t.Errorf("the job says %q; want %q in it", j.Description, tc.says)
				}
				calls.mu.Lock()
				defer calls.mu.Unlock()
				if len(calls.awaiting) != 1 || !errors.Is(calls.awaiting[0], tc.early) || (tc.early == nil && calls.awaiting[0] != nil) {
					t.Errorf("the transaction begun beside the reads ended %v; want once, %v", calls.awaiting, tc.early)
				}
				if calls.after != tc.after {
					t.Errorf("%d transactions after the proof; want %d", calls.after, tc.after)
				}
				after, _ := r.st.LastApply(t.Context())
				if recorded := after.FinishedAt.After(before.FinishedAt) && after.Revision == job.Revision; recorded != tc.applied {
					t.Errorf("the apply's row: %+v (before: %+v); want recorded: %v", after, before, tc.applied)
				}
			})
		}
	}
}
