package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestPaddedRemovalsFillNoDisk is the disk-filling attack of a hostile pkeys
// client against a running manager, on a real OpenSM and every database
// engine: 20 remove_guids_from_pkey requests padded with blanks to nearly the
// 1 MiB a body may have, each removing a GUID that is no member. Each is
// answered as ib-kubernetes expects (200, applied), last_updated moves past
// each answer's Date (ib-kubernetes sends its next change only then), and
// none takes a revision or a job: the database keeps the bytes of the one
// change made. The client's quota ([ufm_pkeys] max_jobs_per_minute, from the
// configuration file) then refuses its change past the bound with 429 and
// Retry-After, nothing recorded, and H1's table holds what it held.
func TestPaddedRemovalsFillNoDisk(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewDatabase(t, engine)
			m := launchManager(t, db, fabricsim.Options{Hosts: 2}, settings{UFMPKeys: []string{
				"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
				"max_jobs_per_minute = 2"}})
			m.confirmSwitches()
			k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
			h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
			k.applied(k.must("POST", "/ufmRest/resources/pkeys",
				fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q], "membership": "full"}`, ufm(h1)), http.StatusOK))
			st := storetest.OpenDatabase(t, db)
			ctx := context.Background()
			rev, err := st.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q]}`, ufm(h2))
			padded := "{" + strings.Repeat(" ", 1<<20-64-len(body)) + body[1:]
			for i := range 20 {
				// ib-kubernetes takes the server's time (validate's Date)
				// before a change, and sends its next only once last_updated
				// is after it.
				before := k.validate()
				resp, answer := k.do("POST", "/ufmRest/actions/remove_guids_from_pkey", padded)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("removal %d: %d %s", i, resp.StatusCode, answer)
				}
				k.applied(answer)
				k.lastUpdatedAfter(before)
			}
			if got, err := st.Revision(ctx); err != nil || got != rev {
				t.Errorf("20 padded removals of nothing took the revision from %d to %d (%v)", rev, got, err)
			}
			u, err := st.PrincipalUsage(ctx, "ib-kubernetes", time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
			if err != nil || u.RecentJobs != 1 || u.RequestBytes > 256 {
				t.Errorf("after 20 padded removals the client's jobs are %+v (%v): want the one change's, its body compact", u, err)
			}
			// The quota: a second change is let through, a third refused.
			k.applied(k.must("POST", "/ufmRest/resources/pkeys",
				fmt.Sprintf(`{"pkey": "0x1006", "guids": [%q], "membership": "full"}`, ufm(h2)), http.StatusOK))
			resp, answer := k.do("POST", "/ufmRest/resources/pkeys",
				fmt.Sprintf(`{"pkey": "0x1007", "guids": [%q], "membership": "full"}`, ufm(h2)))
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" ||
				!strings.Contains(answer, "[ufm_pkeys] max_jobs_per_minute") {
				t.Errorf("third change in a minute: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), answer)
			}
			if got := m.pkeys(h2); slices.Contains(got, 0x9007) || !slices.Contains(got, 0x9006) {
				t.Errorf("H2's table is %s: want 0x9006 and not the refused 0x9007", hex(got))
			}
			if got := m.pkeys(h1); !slices.Contains(got, 0x9005) {
				t.Errorf("H1's table is %s after the removals of another GUID: want 0x9005", hex(got))
			}
		})
	}
}

// lastUpdatedAfter fails the test unless last_updated is after sent, the
// server's time before a change: what ib-kubernetes waits for before its
// next change.
func (k *ufmClient) lastUpdatedAfter(sent time.Time) {
	t := k.m.t
	t.Helper()
	var last struct {
		LastUpdated *string `json:"last_updated"`
	}
	answer := k.must("GET", "/ufmRest/resources/pkeys/last_updated", "", http.StatusOK)
	if err := json.Unmarshal([]byte(answer), &last); err != nil || last.LastUpdated == nil {
		t.Fatalf("last_updated: %s (%v)", answer, err)
	}
	at, err := time.Parse(time.UnixDate, *last.LastUpdated)
	if err != nil || !at.After(sent) {
		t.Errorf("last_updated %q is not after the server's time %v before the change (%v): ib-kubernetes would send "+
			"nothing more", *last.LastUpdated, sent, err)
	}
}
