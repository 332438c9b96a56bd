package applier

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The read-back proof ([opensm] verify = tables): OpenSM's log says a sweep
// applied the file, but not what each port's table holds (OpenSM may not
// have reached a port, or logs differently, or a port was reset since). So
// after the log's proof, and before the jobs complete, the applier reads the
// P_Key table of every host port a job's change touches, and the switch port
// facing it, with SMPs (pkeyread), and completes the sweep's jobs only once
// every one of them shows its change: a GUID added holds the pkey with the
// membership the file gives it, a GUID removed no longer holds it (nor its
// switch port).
//
// The ports a job's change touches are its places: for a port's job, its
// GUID in its network's pkey as the state the sweep applied holds it; for
// every job, the places the sweep added, removed or altered for it, by
// comparing with the state the term applied before (sweepChanges: a removed
// port's GUID, the members a network's VLAN move or a Kubernetes request
// changed). On a term's first apply there is nothing to compare with, and
// the removals and the networks' and pkeys' changes rest on the log alone. They are found once per job and kept while
// it waits, so a later apply that carries the job reads the same ports. The
// cost is one read per touched port, on the Reader's bounded workers.
//
// A job whose places are not all proven (a port down, not in OpenSM's last
// sweep, re-LIDed since, or whose table lacks the change) stays Running, its
// description naming the ports and why, and is read again
// at the loop's polls (at most every proofRetry; the subnet dump is read again
// each time, so a port OpenSM moved or brought back in a later sweep is found
// where it now is). A job still unproven VerifyTimeout after its first
// failed read fails, saying why. The other jobs complete as soon as their
// own ports show their change (finish: fenced, with the gates, with an
// applied row; FinishApplyProven names them), so that one host down does not
// hold every tenant's job of its sweep. A held job is held by every later
// sweep too (each proves all open jobs, or, with pkey errors, leaves the
// held ones out: heldByProof), until its own places are proven. The held
// set lives in the term: a new term proves every open job again.

// DefaultVerifyTimeout is Config.VerifyTimeout's default.
const DefaultVerifyTimeout = 60 * time.Second

// proofRetry is the least time between two reads of the same waiting jobs'
// ports: each costs a few SMPs a port, and a port that is down answers no
// sooner for being asked more often.
const proofRetry = time.Second

// proofReadBound bounds one read of all the touched ports: a fabric that
// does not answer must not stop the loop for long. Ports not read by then
// are read again at the next poll.
const proofReadBound = 10 * time.Second

// proofState is a term's read-back proof in progress.
type proofState struct {
	run      *applyRun // the sweep whose jobs wait for their ports' tables; nil: none
	lastRead time.Time
	said     string // the description last written into the waiting jobs
	// places are each open job's places as first found, and since when it
	// has been unproven: kept across applies while the job waits.
	places map[int64][]place
	since  map[int64]time.Time
	// file is fileOf's partitions file parsed: what each place must hold.
	file   *partitions.File
	fileOf *applyRun
	// offFabric are the ports the last read found in no subnet dump
	// (readWants): a Kubernetes GUID there rests on the log (notAPort).
	offFabric map[fabric.GUID]bool
}

// proveTables reads back the ports the open jobs up to run's revision touch
// and says which jobs may complete: all of them (nil) when every one shows
// its change, or verify = log; else the ones that do, ok false when none
// does. Jobs unproven past VerifyTimeout are failed here; the others wait,
// their description saying why, and are read again by pollProof. A term
// that ends during the read (ctx) writes nothing.
func (t *term) proveTables(ctx context.Context, run *applyRun) (proven *store.Proven, ok bool) {
	if t.Cfg.Readback == nil {
		return nil, true
	}
	t.proof.run, t.proof.lastRead = run, time.Now()
	jobs, err := t.Store.OpenJobs(ctx, run.rev)
	if err != nil {
		if ctx.Err() == nil {
			run.log.Error("read the open jobs for the read-back proof; jobs wait", "error", err)
		}
		return nil, false
	}
	byJob, err := t.jobWants(run, jobs)
	if err != nil {
		// The file was checked before it was written: this is a bug, and no
		// table can be judged against a file that does not parse.
		run.log.Error("parse the applied partitions file for the read-back proof; jobs wait", "error", err)
		return nil, false
	}
	verdicts := t.readWants(ctx, byJob)
	if ctx.Err() != nil {
		return nil, false // the term is over: its successor proves the jobs again
	}
	return t.judgeProof(ctx, run, jobs, byJob, verdicts)
}

// jobWants are the wants of each open job: what OpenSM's file makes of each
// of its places. A place a keyword names (ALL, SELF...) is OpenSM's to
// resolve and the log's to prove: it is left out.
func (t *term) jobWants(run *applyRun, jobs []store.OpenJob) (map[int64][]pkeyread.Want, error) {
	if t.proof.fileOf != run {
		f, err := partitions.ParseFor(run.text, t.Cfg.Rules.Flavour)
		if err != nil {
			return nil, err
		}
		t.proof.file, t.proof.fileOf = f, run
	}
	places := t.jobPlaces(run, jobs)
	byJob := make(map[int64][]pkeyread.Want, len(jobs))
	for _, j := range jobs {
		for _, p := range places[j.ID] {
			if w, ok := wantOf(t.proof.file, p); ok {
				byJob[j.ID] = append(byJob[j.ID], w)
			}
		}
	}
	return byJob, nil
}

// jobPlaces returns the places of each open job, finding those of the jobs
// not seen before (see the top of this file) and forgetting the jobs no
// longer open.
func (t *term) jobPlaces(run *applyRun, jobs []store.OpenJob) map[int64][]place {
	old := t.proof.places
	t.proof.places = make(map[int64][]place, len(jobs))
	var held *partitionPlaces
	var changes sweepChanges
	for _, j := range jobs {
		if p, ok := old[j.ID]; ok {
			t.proof.places[j.ID] = p
			continue
		}
		if held == nil {
			h := heldPlaces(run.snap, t.Cfg.FlatPKey)
			held = &h
			if run.base != nil {
				changes = diffStates(*run.base, run.snap, t.Cfg.FlatPKey)
			}
		}
		var holds []place
		if j.ObjectType == store.ObjectPort {
			// A network's or a pkey's places in the state are all its
			// members: one member off the fabric would hold every later
			// change to it. Its changes are the sweep's comparison's.
			holds = held.of(j)
		}
		t.proof.places[j.ID] = uniquePlaces(holds, changes[objectOf(j)])
	}
	return t.proof.places
}

// uniquePlaces is the places of both lists, each once, in order.
func uniquePlaces(lists ...[]place) []place {
	seen := map[place]bool{}
	var out []place
	for _, l := range lists {
		for _, p := range l {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// wantOf is what the file makes of place p: the membership of its GUID in
// the statement of its pkey (Parse refuses a GUID listed twice), or not a
// member. ok is false when a keyword item may name the port.
func wantOf(f *partitions.File, p place) (w pkeyread.Want, ok bool) {
	w = pkeyread.Want{Port: p.port, PKey: uint16(p.pkey), Membership: pkeyread.NotMember}
	st := f.Statement(p.pkey)
	if st == nil {
		return w, true
	}
	for _, m := range st.Members {
		switch m.Keyword {
		case "":
			if m.GUID == p.port {
				w.Membership = pkeyread.Limited
				if m.Membership == partitions.Full {
					w.Membership = pkeyread.Full
				}
			}
		case partitions.AllSwitches, partitions.AllRouters:
			// They name no host port.
		default:
			return w, false
		}
	}
	return w, true
}

// readWants reads every port the wants name, once each, where OpenSM's last
// subnet dump puts it, and judges each want: its reason, "" when proven.
func (t *term) readWants(ctx context.Context, byJob map[int64][]pkeyread.Want) map[pkeyread.Want]string {
	wants := map[pkeyread.Want]bool{}
	for _, ws := range byJob {
		for _, w := range ws {
			wants[w] = true
		}
	}
	verdicts := make(map[pkeyread.Want]string, len(wants))
	if len(wants) == 0 {
		return verdicts
	}
	ports := map[fabric.GUID]bool{}
	for w := range wants {
		ports[w.Port] = true
	}
	dump := t.readDump()
	if dump.err != nil {
		for w := range wants {
			verdicts[w] = fmt.Sprintf("port %s: OpenSM's subnet dump cannot be read: %v", w.Port, dump.err)
		}
		return verdicts
	}
	sorted := slices.Sorted(maps.Keys(ports))
	targets, missing := pkeyread.Targets(dump.topo, sorted)
	rctx, cancel := context.WithTimeout(ctx, proofReadBound)
	defer cancel()
	results := t.Cfg.Readback.Read(rctx, targets)
	for _, v := range pkeyread.Prove(results, slices.Collect(maps.Keys(wants))) {
		verdicts[v.Want] = v.Reason
	}
	absent := absentPorts(sorted, targets, missing)
	t.proof.offFabric = make(map[fabric.GUID]bool, len(absent))
	for p := range absent {
		t.proof.offFabric[p] = true
	}
	for w := range wants {
		switch err, gone := absent[w.Port]; {
		case gone && w.Membership == pkeyread.NotMember:
			// Not on the fabric at OpenSM's last sweep: it holds nothing
			// anyone can reach, and OpenSM programs it from the file that
			// lacks the pkey when it comes back.
			verdicts[w] = ""
		case gone:
			verdicts[w] = err.Error()
		}
	}
	return verdicts
}

// absentPorts maps the ports Targets did not place to its error for each:
// both lists keep the order of ports.
func absentPorts(ports []fabric.GUID, targets []pkeyread.Target, missing []error) map[fabric.GUID]error {
	out := make(map[fabric.GUID]error, len(missing))
	for _, p := range ports {
		if len(targets) > 0 && targets[0].Port == p {
			targets = targets[1:]
			continue
		}
		if len(missing) > 0 {
			out[p], missing = missing[0], missing[1:]
		}
	}
	return out
}

// judgeProof settles the jobs by their wants' verdicts, as proveTables
// says: the jobs whose ports show their change complete at once, whatever
// the others' (one host down must not hold every tenant's job of its
// sweep); the others wait, or fail past VerifyTimeout.
func (t *term) judgeProof(ctx context.Context, run *applyRun, jobs []store.OpenJob, byJob map[int64][]pkeyread.Want,
	verdicts map[pkeyread.Want]string) (*store.Proven, bool) {
	timeout := t.Cfg.VerifyTimeout
	if timeout <= 0 {
		timeout = DefaultVerifyTimeout
	}
	since := t.proof.since
	t.proof.since = map[int64]time.Time{}
	now := time.Now()
	proven := &store.Proven{Kubernetes: true}
	var waiting []string // the reasons of the jobs that wait
	for _, j := range jobs {
		wants, note := t.notAPort(run, j, byJob[j.ID])
		reasons := append(jobReasons(wants, verdicts), t.heldReasons(wants)...) // holds.go
		if len(reasons) == 0 {
			proven.Jobs = append(proven.Jobs, j.ID)
			if note != "" {
				if proven.Notes == nil {
					proven.Notes = map[int64]string{}
				}
				proven.Notes[j.ID] = note
			}
			continue
		}
		first, seen := since[j.ID]
		if !seen {
			first = now
		}
		if now.Sub(first) >= timeout && t.failUnproven(ctx, run, j.ID, reasons, timeout) {
			continue
		}
		t.proof.since[j.ID] = first
		waiting = append(waiting, reasons...)
		if j.ObjectType == store.ObjectPKey {
			proven.Kubernetes = false // last_updated waits for it
		}
	}
	if run.verified.IsZero() && (len(proven.Jobs) > 0 || len(waiting) == 0) {
		run.verified = now
	}
	if len(waiting) == 0 {
		t.proof.run, t.proof.said = nil, ""
		if len(proven.Notes) > 0 {
			return proven, true // every job, the notes with them
		}
		return nil, true
	}
	t.holdForTables(ctx, run, waiting, timeout)
	return proven, len(proven.Jobs) > 0
}

// failUnproven fails job id, whose ports did not show its change within
// timeout; false when it could not be failed (it waits then).
func (t *term) failUnproven(ctx context.Context, run *applyRun, id int64, reasons []string, timeout time.Duration) bool {
	reason := fmt.Sprintf("OpenSM's log shows this change applied, but the ports' own P_Key tables did not show it within verify_timeout (%s): %s",
		timeout, strings.Join(reasons, "; "))
	run.log.Error("a job's ports do not show its change; failing it", "job", id, "reasons", reasons)
	if _, err := t.Store.FailJob(ctx, t.id, id, reason); err != nil {
		run.log.Error("fail job", "job", id, "error", err)
		return false
	}
	return true
}

// heldByProof is what a sweep that completes its jobs without reading them
// (OpenSM's pkey errors named some: attribution.go) may complete: nil when
// no job waits for its ports' tables; else every open job up to run's
// revision but those, which go on waiting, read again as run's by pollProof.
// A later sweep never completes a job its proof still holds.
func (t *term) heldByProof(ctx context.Context, run *applyRun) *store.Proven {
	if len(t.proof.since) == 0 {
		return nil
	}
	t.proof.run, t.proof.lastRead = run, time.Now()
	proven := &store.Proven{Kubernetes: true}
	jobs, err := t.Store.OpenJobs(ctx, run.rev)
	if err != nil {
		// None completes now: pollProof reads them all.
		run.log.Error("read the open jobs the read-back proof holds; jobs wait", "error", err)
		return &store.Proven{}
	}
	for _, j := range jobs {
		if _, held := t.proof.since[j.ID]; !held {
			proven.Jobs = append(proven.Jobs, j.ID)
		} else if j.ObjectType == store.ObjectPKey {
			proven.Kubernetes = false
		}
	}
	return proven
}

// notAPort is the wants of job j that its ports' tables must prove: all of
// them, but for a Kubernetes pkey's job the GUIDs that OpenSM's subnet dump
// does not list. ib-kubernetes adds the GUIDs of SR-IOV virtual functions,
// which are no port of the subnet and have no P_Key table an SMP can read
// (their pkeys live in the HCA's virtual port, programmed by the driver): a
// VF GUID would otherwise wait verify_timeout and fail at every request,
// and be sent again forever. Those rest on OpenSM's log, as with verify =
// log. A Neutron port's GUID not in the dump is a host down or gone: it waits.
// note, for the job's description, names the GUIDs left to the log.
func (t *term) notAPort(run *applyRun, j store.OpenJob, wants []pkeyread.Want) (read []pkeyread.Want, note string) {
	if j.ObjectType != store.ObjectPKey || len(t.proof.offFabric) == 0 {
		return wants, ""
	}
	var byLog []string
	for _, w := range wants {
		if t.proof.offFabric[w.Port] && w.Membership != pkeyread.NotMember {
			byLog = append(byLog, w.Port.String())
			continue
		}
		read = append(read, w)
	}
	if len(byLog) == 0 {
		return read, ""
	}
	run.log.Info("not a port on the fabric: proven by OpenSM's log", "job", j.ID, "guids", byLog)
	return read, strings.Join(slices.Compact(byLog), ", ") + ": not a port on the fabric: proven by OpenSM's log"
}

// jobReasons are why a job's wants are not proven, each once; none when
// they all are.
func jobReasons(wants []pkeyread.Want, verdicts map[pkeyread.Want]string) []string {
	var out []string
	for _, w := range wants {
		if r := verdicts[w]; r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// maxProofReasons bounds the reasons a waiting job's description lists.
const maxProofReasons = 8

// holdForTables says in the open jobs up to run's revision why they wait.
func (t *term) holdForTables(ctx context.Context, run *applyRun, reasons []string, timeout time.Duration) {
	slices.Sort(reasons)
	reasons = slices.Compact(reasons)
	if len(reasons) > maxProofReasons {
		reasons = append(reasons[:maxProofReasons], fmt.Sprintf("and %d more", len(reasons)-maxProofReasons))
	}
	said := fmt.Sprintf("Not completing until the ports' own P_Key tables show the change (read again every %s; "+
		"a job whose ports do not fails after verify_timeout, %s): %s", proofRetry, timeout, strings.Join(reasons, "; "))
	if said == t.proof.said {
		return
	}
	run.log.Warn("jobs wait for their ports' P_Key tables", "reasons", reasons)
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, run.rev, said); err != nil {
		run.log.Error("describe waiting jobs", "error", err)
		return
	}
	t.proof.said = said
}

// pollProof reads the ports of the jobs that wait for their tables again,
// at most every proofRetry, and completes each once its ports show its
// change. A completion that fails makes the loop apply again. While a gate
// holds the jobs it waits: the sweep after the gates open proves them again.
func (t *term) pollProof(ctx context.Context) {
	run := t.proof.run
	if run == nil || t.applied != run.rev || t.gate.blocked != 0 || time.Since(t.proof.lastRead) < proofRetry {
		return
	}
	proven, ok := t.proveTables(ctx, run)
	if !ok {
		return
	}
	if t.complete(ctx, run, proven) != applyDone {
		t.applied = -1
	}
}
