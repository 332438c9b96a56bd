package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

// TestCompletedUnderTenantSM: a job read Completed while a tenant's OpenSM
// is master is a violation when it was still open, or its request not yet
// sent, once that OpenSM was master; a request that changed nothing,
// answered with a job already read Completed before then, is not one.
func TestCompletedUnderTenantSM(t *testing.T) {
	master := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	before, after := master.Add(-time.Second), master.Add(time.Second)
	for _, tc := range []struct {
		name        string
		sent, open  time.Time // open: the last read not Completed, zero when none
		completedAt time.Time // when the job path was first read Completed, zero when never
		violation   bool
	}{
		{"sent after it became master, completed under it", after, time.Time{}, time.Time{}, true},
		{"open after it became master", before, after, time.Time{}, true},
		{"sent before it became master, never read open", before, time.Time{}, time.Time{}, false},
		{"open only before it became master", before, before, time.Time{}, false},
		{"changed nothing: answered with a job completed before", after, time.Time{}, before, false},
		{"changed nothing: the job completed under it", after, time.Time{}, after, true},
		{"completed before, read open again under it", after, after, before, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "opensm.log")
			line := master.Format("Jan 02 15:04:05 000000") + " [7F] 0x02 -> osm_sm_state_mgr_process: Entering MASTER state\n"
			if err := os.WriteFile(log, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			out := &strings.Builder{}
			r := &run{o: Options{Out: out}, fabric: &fabricsim.Fabric{}, res: Result{ByFault: map[string]int{}},
				completedAt: map[string]time.Time{}}
			r.tenant = &tenantFault{kind: faultTenantSM, sm: &tenantSM{log: log}}
			r.tenant.active.Store(true)
			j := job{path: "app/jobs/1", sent: tc.sent}
			if !tc.completedAt.IsZero() {
				r.completedAt[j.path] = tc.completedAt
			}
			if got := r.completedUnderTenantSM(j, jobStatus{Status: "Completed"}, tc.open); got != tc.violation {
				t.Errorf("violation %v, want %v; printed %q", got, tc.violation, out.String())
			}
		})
	}
}
