package storetest

import (
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// testJobsKeepRequestID: every kind of change keeps its request's ID in the
// job it records, whether the job waits for OpenSM or completes at once, and
// the jobs table gives it back. The longest ID the API accepts fits.
func testJobsKeepRequestID(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	longest := strings.Repeat("r", 128)
	changes := []struct {
		name, requestID string
		status          string
		record          func(id string) (store.Job, error)
	}{
		{"create network", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", store.StatusPending, func(id string) (store.Job, error) {
			return s.RecordNetwork(t.Context(), store.NetworkChange{Network: netSpec(netA, "vlan", "ibnet", vlanID(101)),
				Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`, RequestID: id})
		}},
		{"network with no partition", "haproxy-10.0.0.5:40112_10.0.0.1:443_6a3f", store.StatusCompleted,
			func(id string) (store.Job, error) {
				return s.RecordNetwork(t.Context(), store.NetworkChange{Network: netSpec(netEth, "vlan", "ethnet", vlanID(101)),
					Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`, RequestID: id})
			}},
		{"add port", longest, store.StatusPending, func(id string) (store.Job, error) {
			c := boundPort("p1", netA, guidA, "h1")
			c.Operation, c.RequestID = store.OpAddPort, id
			return s.RecordPort(t.Context(), c)
		}},
		{"port of an unknown network", "req-unknown-network", store.StatusCompleted, func(id string) (store.Job, error) {
			return s.RecordPort(t.Context(), store.PortChange{Port: store.Port{ID: "px", NetworkID: netGone},
				Operation: store.OpUpdatePort, CreatedBy: "test", Request: `{}`, RequestID: id})
		}},
		{"remove port", "req-remove-port", store.StatusPending, func(id string) (store.Job, error) {
			return s.RemovePort(t.Context(), store.PortRemoval{PortID: "p1", CreatedBy: "test", Request: `{}`, RequestID: id})
		}},
		{"remove network", "req-remove-network", store.StatusPending, func(id string) (store.Job, error) {
			return s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: netA, CreatedBy: "test", Request: `{}`,
				RequestID: id})
		}},
		// A change that comes from no request (a tool, a test) has none.
		{"no request", "", store.StatusPending, func(id string) (store.Job, error) {
			return s.RecordNetwork(t.Context(), store.NetworkChange{Network: netSpec(netB, "vlan", "ibnet", vlanID(102)),
				Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`, RequestID: id})
		}},
	}
	for _, c := range changes {
		j, err := c.record(c.requestID)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if j.Status != c.status || j.RequestID != c.requestID {
			t.Errorf("%s: recorded job has status %q and request ID %q, want %q and %q",
				c.name, j.Status, j.RequestID, c.status, c.requestID)
		}
		got, err := s.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatalf("%s: GetJob(%d): %v", c.name, j.ID, err)
		}
		if got.RequestID != c.requestID {
			t.Errorf("%s: job %d's row has request ID %q, want %q", c.name, j.ID, got.RequestID, c.requestID)
		}
	}
}
