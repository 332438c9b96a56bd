package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// newQuotaFixture serves both APIs on a database of engine, with quota for
// networking-mlnx and for ib-kubernetes ([ufm_pkeys]), their usage read
// from that database, and an applier that completes the jobs; m counts the
// refusals.
func newQuotaFixture(t *testing.T, engine string, quota Quota, m *metrics.Metrics) *pkeysFixture {
	st := storetest.Open(t, engine).WithRules(store.Rules{KubernetesRange: kubeRange})
	if quota.Window == 0 {
		quota.Window = time.Hour
	}
	quota.Usage = st
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, Quota: quota,
		PKeys: []PKeysOptions{{Store: st, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword,
			ApplyTimeout: 20 * time.Second, PollInterval: 5 * time.Millisecond, Version: "test 1.0", Quota: quota}}}
	if m != nil {
		opts.Observer = m
	}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	f := &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}, user: ufmUser, password: ufmPassword}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); completeAll(ctx, t, st) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

// completeAll completes every job as an applier that applies each revision
// at once would, until ctx ends: a completion the database aborted for a
// conflict with a change (InnoDB's deadlock victim) is made again, as the
// applier's next turn makes it.
func completeAll(ctx context.Context, t *testing.T, st *store.Store) {
	term, err := st.NewTerm(ctx, "test applier")
	if err != nil {
		if ctx.Err() == nil {
			t.Error(err)
		}
		return
	}
	for ctx.Err() == nil {
		rev, err := st.Revision(ctx)
		if err == nil {
			_, err = st.CompleteJobs(ctx, term, rev)
		}
		if err != nil && ctx.Err() == nil && !store.IsConflict(err) {
			t.Error(err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// padded is body with blanks after its first brace, up to n bytes.
func padded(body string, n int) string {
	return "{" + strings.Repeat(" ", n-len(body)) + body[1:]
}

// usage is ib-kubernetes' usage over the last hour.
func (f *pkeysFixture) usage(principal string) store.Usage {
	f.t.Helper()
	now := time.Now()
	u, err := f.st.PrincipalUsage(context.Background(), principal, now.Add(-time.Hour), now.Add(-time.Minute))
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// TestPaddedNoOpRemovalsStoreNothing is the disk-filling attack: 20
// remove_guids_from_pkey requests padded with blanks to just under the 1 MiB
// a body may have, each removing a GUID that is no member. They are
// answered as ib-kubernetes expects (200, applied), and take no revision and
// no job row of their own: the stored requests stay the size of the one
// change that was made.
func TestPaddedNoOpRemovalsStoreNothing(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newQuotaFixture(t, engine, Quota{}, nil)
			add := fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q], "membership": "full"}`, podGUID1)
			f.must("POST", "/ufmRest/resources/pkeys", add, http.StatusOK)
			rev, before := f.revision(), f.usage(kubernetesPrincipal)
			remove := padded(fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q]}`, podGUID2), MaxBodyBytes-16)
			for i := range 20 {
				if answer := f.must("POST", "/ufmRest/actions/remove_guids_from_pkey", remove, http.StatusOK); !strings.Contains(answer, `"applied":true`) {
					t.Fatalf("removal %d: %s", i, answer)
				}
			}
			if got := f.revision(); got != rev {
				t.Errorf("20 removals of nothing took the revision from %d to %d", rev, got)
			}
			if after := f.usage(kubernetesPrincipal); after != before {
				t.Errorf("20 removals of nothing: jobs and stored bytes %+v, were %+v", after, before)
			}
			// A change stores its body compactly.
			j := jobOfAnswer(t, f.st, f.must("POST", "/ufmRest/actions/remove_guids_from_pkey",
				padded(fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q]}`, podGUID1), 4096), http.StatusOK))
			if want := fmt.Sprintf(`{"pkey":"0x1005","guids":[%q]}`, podGUID1); j.Request != want {
				t.Errorf("the removal's job keeps %d bytes %.80q, want %q", len(j.Request), j.Request, want)
			}
		})
	}
}

// jobOfAnswer reads the job a pkeys change was answered with.
func jobOfAnswer(t *testing.T, st *store.Store, answer string) store.Job {
	t.Helper()
	v := jsonOf[appliedView](t, answer)
	var id int64
	if _, err := fmt.Sscan(v.Job.ID, &id); err != nil {
		t.Fatalf("answer %s: job %q: %v", answer, v.Job.ID, err)
	}
	j, err := st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestNeutronBodiesStoredCompactly: networking-mlnx's bodies, padded, are
// kept without the padding, their strings as sent.
func TestNeutronBodiesStoredCompactly(t *testing.T) {
	f := newQuotaFixture(t, "sqlite", Quota{}, nil)
	body := `{"id": "` + networkID + `", "name": "a  b", "provider:network_type": "vlan",` +
		` "provider:physical_network": "ibnet", "provider:segmentation_id": 101}`
	resp, answer := f.do("POST", "/ufmRestV3/cloudx/Network", "\n\t "+strings.ReplaceAll(body, " ", "   ")+"   \n")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, answer)
	}
	_, id := jobPath(t, answer)
	var n int64
	fmt.Sscan(id, &n)
	j, err := f.st.GetJob(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"` + networkID + `","name":"a      b","provider:network_type":"vlan",` +
		`"provider:physical_network":"ibnet","provider:segmentation_id":101}`
	if j.Request != want {
		t.Errorf("job keeps %q, want %q", j.Request, want)
	}
}

// TestQuotaRefusesChangesOverIt: over its jobs per minute, or its stored
// bytes, a principal's change is answered 429 with Retry-After, saying which
// bound and where it is configured, and counted; the other principal, and
// reads, are served. Both read the database, on every engine.
func TestQuotaRefusesChangesOverIt(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			m := metrics.New()
			f := newQuotaFixture(t, engine, Quota{MaxJobsPerMinute: 3, MaxStoredBytes: 1 << 20}, m)
			for i := range 3 {
				f.must("POST", "/ufmRest/resources/pkeys",
					fmt.Sprintf(`{"pkey": "0x%x", "guids": [%q]}`, 0x1001+i, podGUID1), http.StatusOK)
				if i == 0 {
					// Removals of nothing create no job: they count for nothing.
					for range 10 {
						f.must("POST", "/ufmRest/actions/remove_guids_from_pkey",
							fmt.Sprintf(`{"pkey": "0x1001", "guids": [%q]}`, podGUID2), http.StatusOK)
					}
				}
			}
			resp, answer := f.ufm("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(`{"pkey": "0x1004", "guids": [%q]}`, podGUID1))
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" ||
				!strings.Contains(answer, "3 in the last minute, at most 3 ([ufm_pkeys] max_jobs_per_minute)") {
				t.Errorf("fourth change in a minute: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), answer)
			}
			f.must("GET", "/ufmRest/resources/pkeys", "", http.StatusOK)
			// networking-mlnx has a quota of its own.
			if resp, answer := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")); resp.StatusCode != http.StatusAccepted {
				t.Errorf("networking-mlnx's change beside ib-kubernetes' refusal: %d %s", resp.StatusCode, answer)
			}
			checkMetric(t, m, `afm_requests_refused_total{principal="ufm_pkeys",reason="jobs_per_minute"} 1`)
		})
	}
}

// TestQuotaOfStoredBytes: networking-mlnx's changes are refused once its
// jobs keep its bound of request bytes, and served again under it.
func TestQuotaOfStoredBytes(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			m := metrics.New()
			// Compact: the bytes this process counts of a change let through
			// until it reads the database again are the body's as sent.
			body := string(storedRequest([]byte(testdata(t, "network_create_vlan.json"))))
			f := newQuotaFixture(t, engine, Quota{MaxStoredBytes: int64(len(body) + 1)}, m)
			for i, want := range []int{http.StatusAccepted, http.StatusAccepted, http.StatusTooManyRequests} {
				// Each a change (another VLAN ID, the same length): one as
				// recorded would store nothing.
				change := strings.Replace(body, `"provider:segmentation_id":101`, fmt.Sprintf(`"provider:segmentation_id":%d`, 101+i), 1)
				resp, answer := f.do("POST", "/ufmRestV3/cloudx/Network", change)
				if resp.StatusCode != want {
					t.Fatalf("change %d: %d %s, want %d", i, resp.StatusCode, answer, want)
				}
				if want == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") != "3600" ||
					!strings.Contains(answer, "([api] max_stored_request_bytes)")) {
					t.Errorf("refusal: Retry-After %q: %s", resp.Header.Get("Retry-After"), answer)
				}
			}
			if resp, _ := f.do("GET", "/ufmRestV3/app/jobs/1", ""); resp.StatusCode == http.StatusTooManyRequests {
				t.Error("a job poll was refused by the quota")
			}
			checkMetric(t, m, `afm_requests_refused_total{principal="networking-mlnx",reason="stored_bytes"} 1`)
		})
	}
}

// checkMetric fails t unless m's exposition holds line.
func checkMetric(t *testing.T, m *metrics.Metrics, line string) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !bytes.Contains(rec.Body.Bytes(), []byte(line)) {
		t.Errorf("metrics lack %s", line)
	}
}

// TestQuotaSharedByManagersOnOneDatabase: two managers' APIs on one
// database count a principal's jobs alike: the changes let through by one
// count against the other, which reads them from the database.
func TestQuotaSharedByManagersOnOneDatabase(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewDatabase(t, engine)
			var peers [2]*fixture
			for i := range peers {
				st := storetest.OpenDatabase(t, db)
				opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token,
					Quota: Quota{MaxJobsPerMinute: 2, Window: time.Hour, Usage: st}}
				srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
				t.Cleanup(srv.Close)
				peers[i] = &fixture{t: t, srv: srv, st: st, opts: opts}
			}
			for i, want := range []int{http.StatusAccepted, http.StatusAccepted} {
				if resp, answer := peers[0].do("POST", "/ufmRestV3/cloudx/Network", neutronNetwork(fmt.Sprintf(
					"3b9d6a52-7c1e-4f0a-9e2d-%012x", i), "ibnet", 101+i)); resp.StatusCode != want {
					t.Fatalf("change %d through the first manager: %d %s", i, resp.StatusCode, answer)
				}
			}
			resp, answer := peers[1].do("POST", "/ufmRestV3/cloudx/Network", neutronNetwork("3b9d6a52-7c1e-4f0a-9e2d-00000000000f", "ibnet", 110))
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(answer, "2 in the last minute, at most 2 ([api] max_jobs_per_minute)") {
				t.Errorf("third change, through the second manager: %d %s, want 429", resp.StatusCode, answer)
			}
		})
	}
}

// TestQuotaOfAnUnreachableDatabaseIs503: when the principal's usage cannot be
// read (the database restarting), a change is answered 503 with
// Retry-After, as when it cannot be recorded, and nothing is recorded.
func TestQuotaOfAnUnreachableDatabaseIs503(t *testing.T) {
	st := storetest.Open(t, "sqlite")
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token,
		Quota: Quota{MaxJobsPerMinute: 100, Window: time.Hour, Usage: failingRecorder{syscall.ECONNREFUSED}}}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	f := &fixture{t: t, srv: srv, st: st, opts: opts}
	resp, answer := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(answer, "database unreachable") {
		t.Errorf("a change whose quota cannot be read: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), answer)
	}
	if rev := f.revision(); rev != 0 {
		t.Errorf("revision %d after a change refused for its quota's read", rev)
	}
}

// TestPaddedNoOpNeutronPutsStoreNothing is the disk-filling attack through
// networking-mlnx's API: 20 PUTs of a network and 20 of a port, as
// recorded, padded with blanks to just under the 1 MiB a body may have. Each
// is answered, as networking-mlnx expects, with a job it can poll to
// Completed: the object's newest job, which its change recorded. They take
// no revision and no job row of their own.
func TestPaddedNoOpNeutronPutsStoreNothing(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newQuotaFixture(t, engine, Quota{}, nil)
			network := testdata(t, "network_update.json")
			port := testdata(t, "port_update_host_change.json")
			const networkPath, portPath = "/ufmRestV3/cloudx/Network/" + networkID, "/ufmRestV3/cloudx/Port/51c3e8f2-9a7d-4b6e-8c1f-2d4a6b8e0c13"
			changes := []struct{ path, body string }{{networkPath, network}, {portPath, port}}
			for _, c := range changes {
				first := f.accepted("PUT", c.path, c.body)
				rev, before := f.revision(), f.usage("networking-mlnx")
				for i := range 20 {
					if again := f.accepted("PUT", c.path, padded(c.body, MaxBodyBytes-16)); again != first {
						t.Fatalf("PUT %d of %s as recorded answered %s, want %s", i, c.path, again, first)
					}
				}
				if got := f.revision(); got != rev {
					t.Errorf("20 PUTs of %s as recorded took the revision from %d to %d", c.path, rev, got)
				}
				if after := f.usage("networking-mlnx"); after != before {
					t.Errorf("20 PUTs of %s as recorded: jobs and stored bytes %+v, were %+v", c.path, after, before)
				}
				f.waitCompleted(first)
			}
		})
	}
}

// accepted sends a Neutron change, wants 202, and returns its job's path.
func (f *pkeysFixture) accepted(method, path, body string) string {
	f.t.Helper()
	resp, answer := f.do(method, path, body)
	if resp.StatusCode != http.StatusAccepted {
		f.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, answer)
	}
	p, _ := jobPath(f.t, answer)
	return p
}

// waitCompleted polls job path, as networking-mlnx does, until Completed.
func (f *pkeysFixture) waitCompleted(path string) {
	f.t.Helper()
	for {
		resp, answer := f.do("GET", "/ufmRestV3/"+path, "")
		if resp.StatusCode != http.StatusOK {
			f.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, answer)
		}
		switch status := jsonOf[struct{ Status string }](f.t, answer).Status; status {
		case "Completed":
			return
		case "Pending", "Running":
			time.Sleep(5 * time.Millisecond)
		default:
			f.t.Fatalf("GET %s: %s", path, answer)
		}
	}
}
