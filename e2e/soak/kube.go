package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The pkeys API's settings in the managers' afm.conf. No VLAN the driver
// draws is in kubePKeyRange.
const (
	kubeUser      = "ib-kubernetes"
	kubePassword  = "soak-kubernetes-password-0123"
	kubePKeyRange = "0x1000-0x10ff"
	kubeHostCount = 2 // the last hosts of the fabric are ib-kubernetes' pods', never a Neutron port's
)

var kubePKeys = []uint16{0x1001, 0x1002, 0x1003}

// kubeClient is ib-kubernetes, sending through the pkeys API while the
// driver sends its requests: a second client at once, on hosts of its own
// and pkeys of [ufm_pkeys] pkey_range, so that what it changes and what the
// driver changes commute. Its model (each pkey's members) is fed only by its
// answers. It runs in a goroutine of its own; the run holds gate while it
// converges, so that the model stands still, and reads what it found at the
// end of each round.
type kubeClient struct {
	urls   []string // every manager's: a killed one is passed over, as behind a load balancer
	hosts  []fabric.GUID
	rng    *rand.Rand
	client *http.Client
	fabric atomic.Pointer[fabricsim.Fabric]
	// epoch is odd while a fault is in effect (from its injection until the
	// fabric converged): the client reads tables only across an even epoch
	// that did not move.
	epoch *atomic.Int64
	jobs  *jobOwners // shared with the driver: job ids are one sequence

	gate    sync.Mutex // held for each change, and by the run while it converges
	members map[uint16]map[fabric.GUID]bool
	ops     atomic.Int64
	checks  atomic.Int64

	mu       sync.Mutex
	findings []kubeFinding // violations, for the run to report
	history  []string
	stop     chan struct{}
	done     chan struct{}
}

func newKubeClient(seed uint64, urls []string, hosts []fabric.GUID, f *fabricsim.Fabric, epoch *atomic.Int64,
	jobs *jobOwners) *kubeClient {
	k := &kubeClient{urls: urls, hosts: hosts, rng: rand.New(rand.NewPCG(seed, 0x6b8)), epoch: epoch, jobs: jobs,
		client: &http.Client{Timeout: 60 * time.Second}, members: map[uint16]map[fabric.GUID]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	k.fabric.Store(f)
	return k
}

func (k *kubeClient) start(ctx context.Context) { go k.loop(ctx) }

// close stops the client after its change in flight.
func (k *kubeClient) close() {
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.done
}

func (k *kubeClient) loop(ctx context.Context) {
	defer close(k.done)
	for {
		select {
		case <-k.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(50+k.rng.IntN(400)) * time.Millisecond):
		}
		k.gate.Lock()
		k.change(ctx)
		k.gate.Unlock()
	}
}

func (k *kubeClient) logf(format string, args ...any) {
	k.mu.Lock()
	k.history = append(k.history, "k8s "+fmt.Sprintf(format, args...))
	k.mu.Unlock()
}

// kubeFinding is a violation; stop: the models no longer describe the
// manager (see run.finding).
type kubeFinding struct {
	line string
	stop bool
}

func (k *kubeClient) violation(format string, args ...any) { k.record(true, format, args...) }
func (k *kubeClient) finding(format string, args ...any)   { k.record(false, format, args...) }

func (k *kubeClient) record(stop bool, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	k.mu.Lock()
	k.findings = append(k.findings, kubeFinding{line: line, stop: stop})
	k.history = append(k.history, "k8s VIOLATION: "+line)
	k.mu.Unlock()
}

// drain returns the history lines and violations since the last call.
func (k *kubeClient) drain() (history []string, findings []kubeFinding) {
	k.mu.Lock()
	defer k.mu.Unlock()
	history, findings = k.history, k.findings
	k.history, k.findings = nil, nil
	return history, findings
}

// change draws one change as ib-kubernetes sends it, sends it until it is
// answered (ib-kubernetes retries whatever is not 200), checks the answer
// against the model and, when the answer says applied, the hosts' tables.
func (k *kubeClient) change(ctx context.Context) {
	p := pick(k.rng, kubePKeys)
	g := pick(k.rng, k.hosts)
	ps := fmt.Sprintf("0x%04x", p)
	var method, path, body, what string
	var touched []fabric.GUID
	want := 200
	var apply func()
	switch w := k.rng.IntN(100); {
	case w < 55 || (w < 85 && !k.members[p][g]):
		method, path, what = "POST", "/resources/pkeys", fmt.Sprintf("add %s to %s", g, ps)
		body = fmt.Sprintf(`{"pkey": %q, "guids": [%q], "membership": "full", "index0": false, "ip_over_ib": true}`, ps,
			fmt.Sprintf("%016x", uint64(g)))
		touched = []fabric.GUID{g}
		apply = func() {
			if k.members[p] == nil {
				k.members[p] = map[fabric.GUID]bool{}
			}
			k.members[p][g] = true
		}
	case w < 85:
		method, path, what = "POST", "/actions/remove_guids_from_pkey", fmt.Sprintf("remove %s from %s", g, ps)
		body = fmt.Sprintf(`{"pkey": %q, "guids": [%q]}`, ps, fmt.Sprintf("%016x", uint64(g)))
		touched = []fabric.GUID{g}
		apply = func() { delete(k.members[p], g) }
	default:
		method, path, what = "DELETE", "/resources/pkeys/"+ps, "delete "+ps
		if _, known := k.members[p]; !known {
			want = 404
		}
		for h := range k.members[p] {
			touched = append(touched, h)
		}
		apply = func() { delete(k.members, p) }
	}
	same := path == "/resources/pkeys" && k.members[p][g] // a member added again (all as one): may get its earlier job
	epoch := k.epoch.Load()
	a, lost := k.send(ctx, method, path, body)
	if ctx.Err() != nil {
		return
	}
	n := k.ops.Add(1)
	k.logf("#%d %s %s (%s) -> %s (model: %d)", n, method, path, what, a, want)
	status := a.Status
	if lost && method == "DELETE" && status == 404 && want == 200 {
		status = 200 // an earlier attempt did it
	}
	if status != want {
		k.violation("#%d %s (%s): answered %s; the model expects %d", n, what, method+" "+path, a, want)
		return
	}
	if status != 200 {
		return
	}
	apply()
	var v struct {
		Applied bool `json:"applied"`
		Job     struct {
			ID string `json:"ID"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(a.Body), &v); err != nil {
		k.violation("#%d %s: 200 with a body that is not UFM's answer: %v", n, what, err)
		return
	}
	if v.Job.ID != "" && !same {
		if owner, twice := k.jobs.claim("app/jobs/"+v.Job.ID, fmt.Sprintf("k8s #%d %s", n, what)); twice {
			k.finding("#%d %s: answered with job %s, which was already given to %s", n, what, v.Job.ID, owner)
			return
		}
	}
	if !v.Applied {
		return // recorded, applied later: nothing to prove yet
	}
	if e := k.epoch.Load(); e != epoch || e%2 == 1 {
		return // a fault came meanwhile: the tables may be the fault's
	}
	k.checkTables(ctx, n, what, touched, epoch)
}

// send makes the request until it is answered below 500, to one manager
// after another.
func (k *kubeClient) send(ctx context.Context, method, path, body string) (answer, bool) {
	lost := false
	for attempt := 0; ; attempt++ {
		url := k.urls[attempt%len(k.urls)]
		req, err := http.NewRequestWithContext(ctx, method, url+"/ufmRest"+path, strings.NewReader(body))
		if err != nil {
			return answer{Err: err}, lost
		}
		req.SetBasicAuth(kubeUser, kubePassword)
		req.Header.Set("Content-Type", "application/json")
		a := answer{}
		if resp, err := k.client.Do(req); err != nil {
			a.Err = err
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a = answer{Status: resp.StatusCode, Body: string(b)}
		}
		if a.Err == nil && a.Status < 500 || attempt == 40 || ctx.Err() != nil {
			return a, lost
		}
		// UFM's pkeys API answers 500 for a change OpenSM did not apply (it
		// is recorded, and applied again); any other 500 is a fault of the
		// manager's that ib-kubernetes can only retry.
		if a.Err == nil && a.Status == 500 && !strings.Contains(a.Body, "but OpenSM did not apply it") {
			k.finding("%s %s: answered %s", method, path, a)
		}
		lost = true
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// table is what a host of the client's must hold: the default partition's
// key, and the full key of each pkey it is in.
func (k *kubeClient) table(h fabric.GUID) []uint16 {
	t := []uint16{defaultPKey}
	for p, m := range k.members {
		if m[h] {
			t = append(t, fullBit|p)
		}
	}
	slices.Sort(t)
	return t
}

// checkTables reads the touched hosts' tables after an answer that says
// applied: each must hold exactly what the model holds (no other client
// touches these hosts).
func (k *kubeClient) checkTables(ctx context.Context, n int64, what string, hosts []fabric.GUID, epoch int64) {
	f := k.fabric.Load()
	for _, h := range hosts {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		keys, err := f.PKeys(rctx, h)
		var sw []uint16
		if err == nil {
			sw, err = f.SwitchPKeys(rctx, h)
		}
		cancel()
		if k.epoch.Load() != epoch || ctx.Err() != nil {
			return // a fault came while reading
		}
		if err != nil {
			k.logf("#%d: %s's table not read: %v", n, h, err)
			continue
		}
		slices.Sort(keys)
		slices.Sort(sw)
		k.checks.Add(2)
		want := k.table(h)
		if !slices.Equal(keys, want) || !slices.Equal(sw, want) {
			k.violation("#%d %s answered applied, but %s holds %s, the switch port facing it %s; the model %s", n, what, h,
				hexKeys(keys), hexKeys(sw), hexKeys(want))
		}
	}
}

// partitions is the client's part of the model's partitions file, in the
// model's short form.
func (k *kubeClient) partitions() string {
	var b strings.Builder
	for _, p := range slices.Sorted(func(yield func(uint16) bool) {
		for p := range k.members {
			if !yield(p) {
				return
			}
		}
	}) {
		var m []string
		for g := range k.members[p] {
			m = append(m, g.String())
		}
		slices.Sort(m)
		fmt.Fprintf(&b, "0x%04x:%s;", p, strings.Join(m, ","))
	}
	return b.String()
}

// mergeParts merges two partitions strings of the short form, in key order.
func mergeParts(a, b string) string {
	var all []string
	for _, s := range []string{a, b} {
		for _, e := range strings.Split(s, ";") {
			if e != "" {
				all = append(all, e+";")
			}
		}
	}
	slices.Sort(all)
	return strings.Join(all, "")
}

// snapshot copies the client's model; restore puts a copy back (a database
// restore takes the Kubernetes partitions back too). Both under gate.
func (k *kubeClient) snapshot() map[uint16]map[fabric.GUID]bool {
	s := map[uint16]map[fabric.GUID]bool{}
	for p, m := range k.members {
		s[p] = maps.Clone(m)
		if s[p] == nil {
			s[p] = map[fabric.GUID]bool{}
		}
	}
	return s
}
