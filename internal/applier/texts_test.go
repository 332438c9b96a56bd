package applier

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// A sweep that logs thousands of pkey errors (H1's pkey table is full: every
// pkey after the first fails, about 300 KiB of lines) still ends its jobs, on
// every engine: the jobs the lines name fail, the others complete, the apply
// is recorded, each with a text bounded to what its column holds (on MariaDB a
// longer one was refused, the apply retried, and the next sweep logged the
// same lines, for ever). The whole of every line is in the manager's log.
func TestManyPKeyErrorsStillEndTheJobs(t *testing.T) {
	var lines []string
	for i := range 2500 {
		pkey := 0x9000 + i // Kubernetes pkeys H1 could not take
		if i == 1250 {
			pkey = 0x8065 // the network's, the port job's pkey
		}
		lines = append(lines, fmt.Sprintf("pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x%04x because "+
			"Pkey table is full for node 0x0002c90300000100 port 1 (H1 ☃ %d)", pkey, i))
	}
	const unplaced = "osm_pkey_mgr_process: ERR 0510: osm_prtn_make_partitions() failed"
	tests := []struct {
		name       string
		lines      []string
		h1, h2, nw string // the jobs' statuses after the apply
	}{
		// The network, created before its ports joined, promised no place.
		{"attributed", lines, store.StatusFailed, store.StatusCompleted, store.StatusCompleted},
		{"unattributable", append(lines[:len(lines):len(lines)], unplaced), store.StatusFailed, store.StatusFailed,
			store.StatusFailed},
	}
	for _, engine := range storetest.Engines {
		for _, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				var middle strings.Builder
				for _, l := range tt.lines {
					middle.WriteString(logLine(0x01, l))
				}
				r := newApplyRigOn(t, engine, true, func() string { return heavySweep(middle.String()) })
				var logged testenv.SyncBuffer
				r.term.Log = slog.New(slog.NewTextHandler(&logged, nil))
				nw, h1, h2 := r.h1H2Applied("apply")
				for _, c := range []jobWant{{"H1's", h1, tt.h1}, {"H2's", h2, tt.h2}, {"the network's", nw, tt.nw}} {
					j := r.job(c.job.ID)
					switch {
					case j.Status != c.want:
						t.Errorf("%s job: %s (%.200s), want %s", c.name, j.Status, j.Error, c.want)
					case j.Status == store.StatusFailed && (!strings.Contains(j.Error, "ERR 0512") ||
						len(j.Error) > store.MaxJobText):
						t.Errorf("%s job failed with an error of %d bytes: %.200q...; want why, in at most %d bytes",
							c.name, len(j.Error), j.Error, store.MaxJobText)
					}
				}
				a, err := r.st.LastApply(t.Context())
				if err != nil || a.Revision != nw.Revision+2 || len(a.Detail) > store.MaxJobText ||
					!strings.Contains(a.Detail, "ERR 0512") {
					t.Errorf("last apply: revision %d, detail of %d bytes, %v; want revision %d, the errors in at most %d bytes",
						a.Revision, len(a.Detail), err, nw.Revision+2, store.MaxJobText)
				}
				// Every line, whole, is in the log, for the operator the
				// bounded texts send there.
				log := logged.String()
				for _, l := range tt.lines {
					if !strings.Contains(log, l) {
						t.Fatalf("the log does not hold the line %q", l)
					}
				}
			})
		}
	}
}
