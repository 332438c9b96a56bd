package applier

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// heldReadStore holds the term's first read of the recorded state until the
// test releases it, then answers it: a read whose answer was on its way when
// the term ended.
type heldReadStore struct {
	Store
	once             sync.Once
	entered, release chan struct{}
}

func (s *heldReadStore) ReadSnapshot(ctx context.Context, c *store.SnapshotCache) (store.Snapshot, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.Store.ReadSnapshot(context.WithoutCancel(ctx), c)
}

// With the HA lease a term can end while LeadTerm still reads the recorded
// state before it starts OpenSM: the lease's renewal cancels the term and
// stops OpenSM for it. Here the stop lands after the read's last look at the
// context (the cancel is seen only later, by the loop): LeadTerm's Start,
// reached afterwards, must not bring OpenSM back. The real supervisor supervises
// a real child process, and none may start.
func TestLeadTermStartsNoOpenSMAfterItsStop(t *testing.T) {
	r := newLeadRig(t)
	sm := opensmtest.NewStandIn(t)
	proc := opensm.NewProcess(opensm.ProcessConfig{Command: sm.Command, LogFile: sm.LogFile,
		Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = proc.Stop(context.Background()) })
	held := &heldReadStore{Store: r.st, entered: make(chan struct{}), release: make(chan struct{})}
	app := *r.app
	app.SM, app.Store = proc, held
	term, err := r.st.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.LeadTerm(ctx, term, "") }()
	select {
	case <-held.entered:
	case err := <-done:
		t.Fatalf("LeadTerm returned before its first read: %v", err)
	}
	if err := proc.StopTerm(t.Context(), term); err != nil {
		t.Fatal(err)
	}
	close(held.release)
	// LeadTerm returns at once when its start is refused; a supervisor that
	// started OpenSM again shows it in its state at once.
	deadline := time.Now().Add(30 * time.Second)
	for returned := false; !returned; {
		select {
		case err = <-done:
			returned = true
		case <-time.After(10 * time.Millisecond):
			if st := proc.Status(); st.State != opensm.StateStopped {
				cancel()
				err = <-done
				returned = true
			} else if time.Now().After(deadline) {
				t.Fatal("LeadTerm neither returned nor started OpenSM within 30 s")
			}
		}
	}
	if !errors.Is(err, opensm.ErrTermStopped) {
		t.Errorf("LeadTerm = %v, want its start refused with opensm.ErrTermStopped", err)
	}
	if st := proc.Status(); st.State != opensm.StateStopped {
		t.Errorf("supervisor %+v after the term's stop; want stopped", st)
	}
	if starts := sm.Starts(t); len(starts) > 0 {
		t.Errorf("OpenSM %v started after its term's stop", starts)
	}
}
