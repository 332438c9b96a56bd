package applier

import (
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestReadBackNoAnswerIsNotYetRead: a port that answers no SMP (ibsim drops
// every one to H1, by LID and by directed route) is not yet read, not
// failed: its job stays Running, saying the port did not answer, and
// completes once the port answers again, well within verify_timeout.
func TestReadBackNoAnswerIsNotYetRead(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	r.applied("network")
	if _, err := r.fabric.Sim(t.Context(), `Error "H1"[1] 100`); err != nil {
		t.Fatal(err)
	}
	h1 := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	r.applied("H1's port")
	want := "port " + fabricsim.HostGUID(1).String() + " at LID "
	if j := r.job(h1.ID); j.Status != store.StatusRunning || !strings.Contains(j.Description, want) ||
		!strings.Contains(j.Description, "NodeInfo: no answer") {
		t.Fatalf("H1's job, H1 answering no SMP: %s %q; want Running, saying %q ... NodeInfo: no answer", j.Status, j.Description, want)
	}
	// Polls while it does not answer leave the job waiting.
	r.term.proof.lastRead = time.Time{}
	r.term.pollProof(t.Context())
	if j := r.job(h1.ID); j.Status != store.StatusRunning {
		t.Fatalf("H1's job after a second read without answer: %s %q", j.Status, j.Error)
	}
	if _, err := r.fabric.Sim(t.Context(), `Error "H1"[1] 0`); err != nil {
		t.Fatal(err)
	}
	if j := r.settle(h1.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's job once H1 answers: %s %q", j.Status, j.Error)
	}
}
