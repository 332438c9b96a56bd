package applier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
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
// The ports a job's change touches are its places, recorded with the job in
// its change's transaction (store.OpenJob.Places): a port's GUID in its
// network's pkey, a removed port's GUID in the pkey it left, every member of
// a network whose VLAN moved in the old pkey and the new, the GUIDs a
// Kubernetes request added, removed or altered, an adopted partition's
// members. Each place is judged against what the applied partitions file
// gives it (wantOf): the file renders every change up to the sweep's
// revision, so that is the job's own promise, or, where a later change of
// the same port and pkey promised otherwise, the later one: a superseded
// place is proven by its successor. What is read depends on nothing the term
// remembers: a new term, a restart, a gate that reopened, a held sweep, a
// pkey error elsewhere in the sweep read exactly the same places. The cost is
// one read per touched port, on the Reader's bounded workers.
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
// hold every tenant's job of its sweep: a tenant can hold only its own jobs.
// Every later sweep proves all open jobs the same way, until each one's own
// places are proven.

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
	said     map[int64]string // the description last written into each waiting job
	// since is when each waiting job was first found unproven: its
	// verify_timeout runs from there, across the term's applies.
	since map[int64]time.Time
	// file is fileOf's partitions file parsed: what each place must hold.
	file   *partitions.File
	fileOf *applyRun
	// offFabric are the ports the last read found in no subnet dump
	// (readWants): a Kubernetes GUID there rests on the log (notAPort).
	offFabric map[fabric.GUID]bool
	// unanswered are the ports whose last read failed, and when: they are
	// read after the others, within a budget of their own (readOrder).
	unanswered map[fabric.GUID]time.Time
	// unset are the ports the last read reached whose tables did not show
	// a want or did not answer (setfailures.go's unsetPorts).
	unset map[fabric.GUID]bool
	// read are the ports the last read-back read (the open jobs' places):
	// finish's second-SM look reads their MasterSMLID (takeRead).
	read []fabric.GUID
}

// takeRead returns the ports the last read-back read, once.
func (p *proofState) takeRead() []fabric.GUID {
	read := p.read
	p.read = nil
	return read
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
	jobs, byJob, ok := t.proofWants(ctx, run)
	if !ok {
		return nil, false
	}
	return t.proveWants(ctx, run, jobs, byJob, t.readDump())
}

// proofWants reads the open jobs up to run's revision and what each of
// their places must show (jobWants); ok false when they cannot be read.
// The read made during the sweep (run.wants) stands for it when it
// succeeded.
func (t *term) proofWants(ctx context.Context, run *applyRun) ([]store.OpenJob, map[int64][]pkeyread.Want, bool) {
	t.proof.run, t.proof.lastRead = run, time.Now()
	if w := run.takeWants(); w.err == nil && w.read {
		return w.jobs, w.byJob, true
	}
	w := t.openWants(ctx, run)
	switch {
	case w.err == nil:
		return w.jobs, w.byJob, true
	case w.jobs == nil && ctx.Err() == nil:
		run.log.Error("read the open jobs for the read-back proof; jobs wait", "error", w.err)
	case w.jobs != nil:
		// The file was checked before it was written: this is a bug, and no
		// table can be judged against a file that does not parse.
		run.log.Error("parse the applied partitions file for the read-back proof; jobs wait", "error", w.err)
	}
	return nil, nil, false
}

// openWants is the open jobs up to run's revision and their wants; err
// when the jobs (jobs nil) or the file (jobs read) could not be read.
type openWants struct {
	read  bool
	jobs  []store.OpenJob
	byJob map[int64][]pkeyread.Want
	err   error
}

// openWants reads the open jobs up to run's revision and their wants.
func (t *term) openWants(ctx context.Context, run *applyRun) openWants {
	jobs, err := t.Store.OpenJobs(ctx, run.rev)
	if err != nil {
		return openWants{read: true, err: err}
	}
	byJob, err := t.jobWants(run, jobs)
	return openWants{read: true, jobs: jobs, byJob: byJob, err: err}
}

// readWantsDuringSweep starts, with verify = tables, the read of the open
// jobs up to run's revision and of their wants while OpenSM sweeps:
// proofWants takes it after the sweep (takeWants), which it would otherwise
// wait for. The same jobs are read as after the sweep: every job up to the
// revision was committed before the state was read (a later change takes a
// later revision), a job's places are written with it, and only this loop,
// waiting for the sweep meanwhile, completes or fails jobs (a newer term's
// writes fence this term's completion, whatever it read). What the read
// touches of the term (the parsed file of jobWants) nothing else touches
// until apply has waited for it (takeWants), on every path.
func (t *term) readWantsDuringSweep(ctx context.Context, run *applyRun) {
	if t.Cfg.Readback == nil {
		return
	}
	done := make(chan openWants, 1)
	go func() { done <- t.openWants(ctx, run) }()
	run.wantsRead = done
}

// proveWants is proveTables once the wants are known: it reads their ports
// where dump, the apply's read of the subnet dump, puts them, and judges.
func (t *term) proveWants(ctx context.Context, run *applyRun, jobs []store.OpenJob, byJob map[int64][]pkeyread.Want,
	dump dumpRead) (*store.Proven, bool) {
	verdicts := t.readWants(ctx, byJob, run.signalled, dump)
	if ctx.Err() != nil {
		return nil, false // the term is over: its successor proves the jobs again
	}
	return t.judgeProof(ctx, run, jobs, byJob, verdicts)
}

// wantPorts are the ports the wants name, each once: the ones readWants
// reads.
func wantPorts(byJob map[int64][]pkeyread.Want) []fabric.GUID {
	var ports []fabric.GUID
	for _, ws := range byJob {
		for _, w := range ws {
			ports = append(ports, w.Port)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
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
	places := jobPlaces(run.snap, t.Cfg.FlatPKey)
	byJob := make(map[int64][]pkeyread.Want, len(jobs))
	for _, j := range jobs {
		for _, p := range places.of(j) {
			if w, ok := wantOf(t.proof.file, p); ok {
				byJob[j.ID] = append(byJob[j.ID], w)
			}
		}
	}
	return byJob, nil
}

// placeFinder finds the places of open jobs (see the top of this file).
type placeFinder struct {
	snap     store.Snapshot
	flatPKey fabric.PKey
	pkeys    map[string]fabric.PKey // the managed networks' pkeys in snap; nil: not read yet
}

func jobPlaces(snap store.Snapshot, flatPKey fabric.PKey) *placeFinder {
	return &placeFinder{snap: snap, flatPKey: flatPKey}
}

// of is job j's places, each once: those its change recorded. A job the
// previous release wrote recorded none (a rolling upgrade): a port's job then
// falls back to its GUID in its network's pkey as the applied state holds
// it. That is the only fallback: what a removal, a network's VLAN move or
// delete, or a Kubernetes or adoption change took out of a table is no
// longer in any state to find it in, and what it put in cannot be told from
// what other changes put there; those rest on OpenSM's log, as they did in
// that release when no earlier state was at hand.
func (f *placeFinder) of(j store.OpenJob) []place {
	if len(j.Places) > 0 {
		seen := make(map[place]bool, len(j.Places))
		out := make([]place, 0, len(j.Places))
		for _, p := range j.Places {
			if pl := (place{port: p.GUID, pkey: p.PKey}); !seen[pl] {
				seen[pl] = true
				out = append(out, pl)
			}
		}
		return out
	}
	if j.ObjectType != store.ObjectPort || j.GUID == nil {
		return nil
	}
	if f.pkeys == nil {
		f.pkeys = partitionPKeys(f.snap, f.flatPKey)
	}
	if pkey, managed := f.pkeys[j.NetworkID]; managed {
		return []place{{port: *j.GUID, pkey: pkey}}
	}
	return nil
}

// partitionPKeys are the pkeys of a state's managed networks (a flat one's
// is flatPKey).
func partitionPKeys(snap store.Snapshot, flatPKey fabric.PKey) map[string]fabric.PKey {
	pkeys := make(map[string]fabric.PKey, len(snap.Networks))
	for _, n := range snap.Networks {
		switch {
		case !n.Managed:
		case n.PKey == nil:
			pkeys[n.ID] = flatPKey
		default:
			pkeys[n.ID] = *n.PKey
		}
	}
	return pkeys
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
// subnet dump (dump, the apply's read of it) puts it, and judges each want: its reason, "" when proven.
// The ports are read in readOrder's order, the ports whose last read failed
// within a budget of their own: a fabric with ports that never answer still
// reads every other port at every poll. signalled is when OpenSM was sent
// the file the wants come from (dumpSwept).
func (t *term) readWants(ctx context.Context, byJob map[int64][]pkeyread.Want, signalled time.Time,
	dump dumpRead) map[pkeyread.Want]string {
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
	if dump.err != nil {
		for w := range wants {
			verdicts[w] = fmt.Sprintf("port %s: OpenSM's subnet dump cannot be read: %v", w.Port, dump.err)
		}
		return verdicts
	}
	answered, unanswered := t.readOrder(byJob)
	t.proof.read = append(slices.Clone(answered), unanswered...)
	t.proof.offFabric = map[fabric.GUID]bool{}
	absent := map[fabric.GUID]error{}
	var results []pkeyread.Result
	for _, lane := range []struct {
		ports []fabric.GUID
		bound time.Duration
	}{{answered, proofReadBound - unansweredBudget}, {unanswered, unansweredBudget}} {
		targets, missing := pkeyread.Targets(dump.topo, lane.ports)
		results = append(results, t.readLane(ctx, targets, lane.bound)...)
		for p, err := range absentPorts(lane.ports, targets, missing) {
			absent[p] = err
			t.proof.offFabric[p] = true
		}
	}
	for _, v := range pkeyread.Prove(results, slices.Collect(maps.Keys(wants))) {
		verdicts[v.Want] = v.Reason
	}
	t.proof.unset = unsetPorts(results, verdicts)
	swept := t.dumpSwept(signalled)
	for w := range wants {
		switch err, gone := absent[w.Port]; {
		case gone && w.Membership == pkeyread.NotMember && swept:
			// Not on the fabric at a sweep of the file that lacks the pkey:
			// it holds nothing anyone can reach, and OpenSM programs it
			// from that file (or a newer one) when it comes back.
			verdicts[w] = ""
		case gone && w.Membership == pkeyread.NotMember:
			verdicts[w] = err.Error() + " (a dump older than the sweep of this change: OpenSM rewrites it only " +
				"at a SUBNET UP, so the port may be on the fabric, its sweeps ending with errors)"
		case gone:
			verdicts[w] = err.Error()
		}
	}
	return verdicts
}

// dumpSwept says whether OpenSM's subnet dump was written after signalled:
// by a sweep that came up (OpenSM rewrites it only at SUBNET UP) with the
// file sent then, or a newer one. An older dump lists the ports of an
// earlier sweep: a host that bounced its link then and whose Sets fail
// since (every sweep ending with errors, none rewriting the dump) is
// missing from it while it is on the fabric, its table and its switch
// port's unread. (A file's time is the kernel's coarse clock, a tick behind:
// a dump written within a tick of the signal reads as older, and the jobs
// wait for the next poll's, which a sweep's length makes impossible.)
func (t *term) dumpSwept(signalled time.Time) bool {
	fi, err := os.Stat(t.subnetDump().Path())
	return err == nil && !fi.ModTime().Before(signalled)
}

// unansweredBudget is the part of proofReadBound the ports whose last read
// failed share: a port that does not answer costs the Reader's PortTimeout
// a worker, and a few such ports read first would take the whole bound
// from the ports after them at every poll. It holds one PortTimeout (2 s)
// and an answer: a port that answers only to the M_Key before a rotation's
// (tried second) is still read within it.
const unansweredBudget = proofReadBound / 4

// readOrder is the order the ports of the wants are read in, in two lanes:
// first the ports whose last read did not fail, those of the oldest waiting
// job (the lowest id) first, so that the jobs waiting longest are proven
// first; then the ports whose last read failed, the one tried longest ago
// first, so that each has its turn within their budget.
func (t *term) readOrder(byJob map[int64][]pkeyread.Want) (answered, unanswered []fabric.GUID) {
	seen := map[fabric.GUID]bool{}
	for _, id := range slices.Sorted(maps.Keys(byJob)) {
		for _, w := range byJob[id] {
			if seen[w.Port] {
				continue
			}
			seen[w.Port] = true
			if _, failed := t.proof.unanswered[w.Port]; failed {
				unanswered = append(unanswered, w.Port)
			} else {
				answered = append(answered, w.Port)
			}
		}
	}
	for p := range t.proof.unanswered {
		if !seen[p] {
			delete(t.proof.unanswered, p) // no longer waited for
		}
	}
	slices.SortStableFunc(unanswered, func(a, b fabric.GUID) int {
		return t.proof.unanswered[a].Compare(t.proof.unanswered[b])
	})
	return answered, unanswered
}

// readLane reads targets within bound, and notes which ports failed their
// read (a port the bound left unread keeps its turn).
func (t *term) readLane(ctx context.Context, targets []pkeyread.Target, bound time.Duration) []pkeyread.Result {
	if len(targets) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	results := t.tables().Read(rctx, targets)
	if t.proof.unanswered == nil {
		t.proof.unanswered = map[fabric.GUID]time.Time{}
	}
	now := time.Now()
	for _, r := range results {
		switch {
		case r.Err == nil:
			delete(t.proof.unanswered, r.Target.Port)
		case errors.Is(r.Err, pkeyread.ErrNotRead):
		default:
			t.proof.unanswered[r.Target.Port] = now
		}
	}
	return results
}

// tableReader reads ports' P_Key tables: Cfg.Readback.
type tableReader interface {
	Read(ctx context.Context, targets []pkeyread.Target) []pkeyread.Result
}

// tables is the term's tableReader: Cfg.Readback, unless a test put a fake
// in readTables.
func (t *term) tables() tableReader {
	if t.readTables != nil {
		return t.readTables
	}
	return t.Cfg.Readback
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
	waiting := map[int64][]string{} // the reasons of each job that waits
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
		waiting[j.ID] = reasons
		if j.ObjectType == store.ObjectPKey {
			proven.Kubernetes = false // last_updated waits for it
		}
	}
	if run.verified.IsZero() && (len(proven.Jobs) > 0 || len(waiting) == 0) {
		run.verified = now
	}
	if len(waiting) == 0 {
		t.proof.run, t.proof.said = nil, nil
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

// holdForTables says in each waiting job why it waits: its own ports, never
// another job's (a tenant's job names no other tenant's hosts). A job is
// written only when its text changed.
func (t *term) holdForTables(ctx context.Context, run *applyRun, waiting map[int64][]string, timeout time.Duration) {
	said := make(map[int64]string, len(waiting))
	var all []string
	for id, reasons := range waiting {
		text := proofText(reasons, timeout)
		said[id] = text
		if text == t.proof.said[id] {
			continue
		}
		all = append(all, reasons...)
		if _, err := t.Store.DescribeJob(ctx, t.id, id, text); err != nil {
			run.log.Error("describe a waiting job", "job", id, "error", err)
			delete(said, id) // written again at the next read
		}
	}
	if len(all) > 0 {
		run.log.Warn("jobs wait for their ports' P_Key tables", "jobs", len(waiting), "reasons", compactReasons(all))
	}
	t.proof.said = said
}

// proofText is a waiting job's second line of description.
func proofText(reasons []string, timeout time.Duration) string {
	return fmt.Sprintf("Not completing until the ports' own P_Key tables show the change (read again every %s; "+
		"a job whose ports do not fails after verify_timeout, %s): %s", proofRetry, timeout,
		strings.Join(compactReasons(reasons), "; "))
}

// compactReasons is reasons sorted, each once, at most maxProofReasons of
// them and a count of the rest.
func compactReasons(reasons []string) []string {
	reasons = slices.Compact(slices.Sorted(slices.Values(reasons)))
	if len(reasons) > maxProofReasons {
		reasons = append(reasons[:maxProofReasons:maxProofReasons], fmt.Sprintf("and %d more", len(reasons)-maxProofReasons))
	}
	return reasons
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
	if t.complete(ctx, run, proven, nil) != applyDone {
		t.forget("the jobs whose ports showed their change could not be completed")
	}
}

// closeConns closes the SMP connections the term's reads kept open between
// them (pkeyread.Pool: the read-back's, the audit's, the second-SM look's):
// a term holds them, the next opens its own.
func (t *term) closeConns() {
	var dialers []pkeyread.Dialer
	if t.Cfg.Readback != nil {
		dialers = append(dialers, t.Cfg.Readback.Dialer)
	}
	if t.Cfg.Audit.Reader != nil {
		dialers = append(dialers, t.Cfg.Audit.Reader.Dialer)
	}
	if t.SecondSM != nil {
		dialers = append(dialers, t.SecondSM.Dialer)
	}
	for _, d := range dialers {
		if p, ok := d.(interface{ CloseIdle() error }); ok {
			if err := p.CloseIdle(); err != nil {
				t.Log.Debug("close the term's SMP connections", "error", err)
			}
		}
	}
}

// dialAhead prepares, while OpenSM sweeps, the connection of the read after
// the sweep's end on d, when d can (a pkeyread.Ahead: on the simulator,
// whose attach is a round trip to a simulator busy with the sweep's end);
// release closes it if no read took it. Every SMP is still sent after the
// sweep's end: attaching reads nothing of the fabric.
func dialAhead(ctx context.Context, d pkeyread.Dialer) (release func()) {
	if a, ok := d.(*pkeyread.Ahead); ok {
		return a.Prepare(ctx)
	}
	return func() {}
}
