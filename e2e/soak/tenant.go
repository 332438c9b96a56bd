package soak

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The hostile tenant's faults: a bare-metal tenant owns its hosts' HCAs and
// can make them misbehave. Each is done to one tenant's hosts; the jobs of
// the other tenants (the innocent: their requests touch none of those
// hosts) must go on completing meanwhile.
const (
	faultDropSets  = "drop-sets"  // a host drops OpenSM's P_KeyTable MADs and bounces its link
	faultCloneGUID = "clone-guid" // a host takes another host's GUID, then gives it back
	faultTenantSM  = "tenant-sm"  // a tenant runs a stock OpenSM of a lower priority on its host's port
)

// TenantFaults are the hostile tenant's fault kinds. They are in Faults
// (--faults all) and not yet in CIFaults: each holds for longer than the
// bound on an innocent job's wait (heldBound), which a short run pays for.
var TenantFaults = []string{faultDropSets, faultCloneGUID, faultTenantSM}

// checkInterval is the managers' [opensm] check_interval (rig.go's conf).
const checkInterval = time.Second

// heldBound is how long an innocent job may stay held while a tenant's fault
// runs: two of the manager's apply cycles, each a heavy sweep it waits for up
// to sweep_timeout and a check_interval before it applies again, and two
// seconds for the read-back that proves the sweep and the poll that sees it.
// A job must also have seen two heavy sweeps begin and end after its request
// (sweepsToHold) before its wait counts as held.
const heldBound = 2*(sweepTimeout+checkInterval) + 2*time.Second

// sweepsToHold is how many heavy sweeps must have ended after a request
// before its job counts as held: the one that was perhaps under way when it
// came, and two whole ones.
const sweepsToHold = 3

// tenantHold is how long a tenant's fault holds at least: past heldBound, so
// that an innocent job held by it is seen held.
const tenantHold = heldBound + 2*time.Second

// tenantFault is the round's hostile tenant's fault.
type tenantFault struct {
	kind   string
	hosts  []fabric.GUID // the fault's hosts: the jobs that touch them may wait, or fail with a reason
	active atomic.Bool   // false once the heal is under way
	sm     *tenantSM     // tenant-sm's OpenSM
}

// touches says whether a job's request changed a table of the fault's hosts,
// or a port on one of them: a job of the fault's own tenant.
func (t *tenantFault) touches(j job) bool {
	in := func(h fabric.GUID) bool { return slices.Contains(t.hosts, h) }
	return slices.ContainsFunc(j.hosts, in) || slices.ContainsFunc(j.named, in)
}

// requestPortGUIDs are the GUIDs of the port a request names in its path
// (PUT or DELETE /cloudx/Port/<id>), before and after it, changed or not: a
// request sent again for a port already as it asks still makes a job whose
// places are that port's (the manager proves it), so that job is the port's
// host's tenant's.
func requestPortGUIDs(path string, before, after map[string]port) []fabric.GUID {
	i := strings.Index(path, "/Port/")
	if i < 0 {
		return nil
	}
	id := path[i+len("/Port/"):]
	var out []fabric.GUID
	for _, p := range []port{before[id], after[id]} {
		if p.GUID != nil && !slices.Contains(out, *p.GUID) {
			out = append(out, *p.GUID)
		}
	}
	return out
}

// portGUIDsChanged are the GUIDs of the ports a request changed (recorded,
// removed, moved, rebound), the old and the new.
func portGUIDsChanged(before, after map[string]port) []fabric.GUID {
	var out []fabric.GUID
	add := func(p port) {
		if p.GUID != nil && !slices.Contains(out, *p.GUID) {
			out = append(out, *p.GUID)
		}
	}
	same := func(a, b port) bool {
		return a.Network == b.Network && a.Host == b.Host && (a.GUID == nil) == (b.GUID == nil) &&
			(a.GUID == nil || *a.GUID == *b.GUID)
	}
	for id, p := range before {
		if q, ok := after[id]; !ok || !same(p, q) {
			add(p)
		}
	}
	for id, q := range after {
		if p, ok := before[id]; !ok || !same(p, q) {
			add(q)
		}
	}
	return out
}

// tenantHost draws the fault's host: mostly one whose table holds a
// network's key, so that the round's requests are likely to touch it too.
func (r *run) tenantHost(not ...fabric.GUID) fabricsim.Host {
	var from []fabric.GUID
	for _, h := range r.hosts {
		if !slices.Contains(not, h) {
			from = append(from, h)
		}
	}
	h := pick(r.rng, from)
	if held := r.heldHosts(); r.rng.IntN(3) > 0 {
		held = slices.DeleteFunc(held, func(g fabric.GUID) bool { return slices.Contains(not, g) })
		if len(held) > 0 {
			h = pick(r.rng, held)
		}
	}
	return r.fabric.Host(r.hostName(h))
}

// bounce takes a host's link down and up again: OpenSM meets the port anew
// (a trap, a heavy sweep) and must program its table.
func (r *run) bounce(ctx context.Context, node string) error {
	if err := r.fabric.Unlink(ctx, node); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	return r.fabric.Relink(ctx, node)
}

// dropSets makes a tenant's host drop every P_KeyTable MAD (ibsim filters by
// attribute, not by method: OpenSM's Sets are dropped, and the checker's
// Gets with them) and bounces its link, for longer than heldBound, then
// heals it. Only the jobs that touch the host may wait.
func (r *run) dropSets(ctx context.Context) (string, chan error, error) {
	h := r.tenantHost()
	cmd := fmt.Sprintf(`Error "%s"[1] 100 %d`, h.Name, attrPKeyTable)
	if _, err := r.fabric.Sim(ctx, cmd); err != nil {
		return "", nil, fmt.Errorf("ibsim %s: %w", cmd, err)
	}
	pf := &pkeyFault{host: h.PortGUID}
	pf.active.Store(true)
	r.pkeyFault = pf
	tf := &tenantFault{kind: faultDropSets, hosts: []fabric.GUID{h.PortGUID}}
	tf.active.Store(true)
	r.tenant = tf
	r.excluded[h.PortGUID] = "drops OpenSM's Sets"
	if err := r.bounce(ctx, h.Name); err != nil {
		return "", nil, err
	}
	d := tenantHold + r.duration(4000)
	f := r.fabric
	return fmt.Sprintf("%s drops OpenSM's P_KeyTable MADs, its link bounced, for %s", h.Name, d), later(d, func() error {
		pf.active.Store(false)
		tf.active.Store(false)
		_, err := f.Sim(context.WithoutCancel(ctx), fmt.Sprintf(`Error "%s"[1] 0`, h.Name))
		return err
	}), nil
}

// attrPKeyTable is the P_KeyTable attribute's ID in ibsim's Error command.
const attrPKeyTable = 0x16

// cloneGUID makes a tenant's host take another host's GUID (ibsim's Guid on
// the node: its port GUID follows, node GUID + 1) and bounces its link so
// that OpenSM meets the clone; after a while it gives the GUID back and
// bounces again. Meanwhile either the jobs wait with a reason named, or
// only the two hosts' jobs wait.
func (r *run) cloneGUID(ctx context.Context) (string, chan error, error) {
	victim := r.tenantHost()
	cloner := r.tenantHost(victim.PortGUID)
	set := func(ctx context.Context, to fabric.GUID) error {
		cmd := fmt.Sprintf(`Guid "%s" %s`, cloner.Name, to-1)
		if _, err := r.fabric.Sim(ctx, cmd); err != nil {
			return fmt.Errorf("ibsim %s: %w", cmd, err)
		}
		return r.bounce(ctx, cloner.Name)
	}
	tf := &tenantFault{kind: faultCloneGUID, hosts: []fabric.GUID{victim.PortGUID, cloner.PortGUID}}
	tf.active.Store(true)
	r.tenant = tf
	// Read by GUID, the two are one port to OpenSM's cache: not read until converged.
	r.excluded[victim.PortGUID] = "its GUID cloned"
	r.excluded[cloner.PortGUID] = "cloned another host's GUID"
	if err := set(ctx, victim.PortGUID); err != nil {
		return "", nil, err
	}
	d := tenantHold + r.duration(4000)
	return fmt.Sprintf("%s takes %s's GUID %s for %s", cloner.Name, victim.Name, victim.PortGUID, d), later(d, func() error {
		tf.active.Store(false)
		if err := set(context.WithoutCancel(ctx), cloner.PortGUID); err != nil {
			return err
		}
		// OpenSM sent the victim GUID's Sets to whichever of the two ports
		// it took for it, and reads a port's table again only when it meets
		// the port anew: the victim's own table may keep a pkey its removal
		// took out, which OpenSM believes gone, while the switch port facing
		// it (what enforces) is right. The manager does not rewrite a host's
		// table (docs/isolation-proof.md, a lying host: its audit holds that
		// port's jobs and names it); the victim's link bounces too, as its
		// owner would once the clone is gone, so that OpenSM programs it.
		return r.bounce(context.WithoutCancel(ctx), victim.Name)
	}), nil
}

// tenantSMFault starts a stock OpenSM on a tenant's host's port, with a
// priority below the manager's (0; the manager's OpenSM runs at the default
// 1), for longer than heldBound, then stops it. On ibsim M_Keys are ignored:
// if it becomes master, it really programs the ports (its partitions file
// holds only the default partition), and no job may complete while it is.
func (r *run) tenantSMFault(ctx context.Context) (string, chan error, error) {
	h := r.tenantHost()
	sm, err := startTenantSM(r.fabric, h, r.dir+"-tenant-sm")
	if err != nil {
		return "", nil, err
	}
	tf := &tenantFault{kind: faultTenantSM, hosts: []fabric.GUID{h.PortGUID}, sm: sm}
	tf.active.Store(true)
	r.tenant = tf
	d := tenantHold + r.duration(4000)
	return fmt.Sprintf("a tenant's OpenSM (priority 0, pid %d) on %s's port for %s", sm.cmd.Process.Pid, h.Name, d),
		later(d, func() error {
			tf.active.Store(false)
			sm.killed = !sm.stop()
			return nil
		}), nil
}

// endTenant notes, once the round's fault has ended, what the tenant's
// OpenSM did; one that had to be killed left its simulator slot taken.
func (r *run) endTenant() {
	tf := r.tenant
	if tf == nil || tf.sm == nil {
		return
	}
	if tf.sm.killed {
		r.leaked++
	}
	if tf.sm.mastered() {
		r.logf("the tenant's OpenSM on %s was master at times", r.hostNames(tf.hosts))
	}
}

// tenantSM is a stock OpenSM a tenant runs on its host's port.
type tenantSM struct {
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	killed bool // SIGTERM did not end it (written before the fault's end returns)
}

// startTenantSM starts OpenSM on host h's port, in dir: outside the engine's
// directory, so that the master watch, which looks for the managers'
// OpenSMs, does not count it.
func startTenantSM(f *fabricsim.Fabric, h fabricsim.Host, dir string) (*tenantSM, error) {
	opensm, err := fabricsim.LookPath("opensm")
	if err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env, _ := f.SMEnv(1)
	for i, line := range env {
		switch name, _, _ := strings.Cut(line, "="); name {
		case "SIM_HOST":
			env[i] = "SIM_HOST=" + h.Name
		case "OSM_CACHE_DIR", "OSM_TMP_DIR":
			env[i] = name + "=" + dir
		}
	}
	partitions, conf := filepath.Join(dir, "partitions.conf"), filepath.Join(dir, "opensm.conf")
	for path, text := range map[string]string{
		partitions: "Default=0x7fff,ipoib : ALL=limited, SELF=full ;\n",
		conf:       "log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 1\nsm_priority 0\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	sm := &tenantSM{log: filepath.Join(dir, "opensm.log"), exited: make(chan struct{})}
	sm.cmd = exec.Command(opensm, "-F", conf, "-g", h.PortGUID.String(), "-P", partitions, "-f", sm.log, "-d", "2",
		"--dump_files_dir", dir)
	sm.cmd.Dir = dir
	sm.cmd.Env = append(fabricsim.WithSbinPath(os.Environ()), env...)
	if err := sm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the tenant's OpenSM: %w", err)
	}
	go func() { sm.cmd.Wait(); close(sm.exited) }()
	return sm, nil
}

// stop ends the tenant's OpenSM with SIGTERM, which detaches it from the
// simulator, or SIGKILL after 10 s; it says whether SIGTERM did.
func (sm *tenantSM) stop() bool {
	sm.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sm.exited:
		return true
	case <-time.After(10 * time.Second):
		sm.cmd.Process.Kill()
		<-sm.exited
		return false
	}
}

// masterSince is when the tenant's OpenSM last became master, if it is
// master now: the last state its log entered is MASTER.
func (sm *tenantSM) masterSince() (time.Time, bool) {
	b, _ := os.ReadFile(sm.log)
	s := string(b)
	i := strings.LastIndex(s, "Entering MASTER state")
	if i < 0 || strings.Contains(s[i:], "Entering STANDBY state") || strings.Contains(s[i:], "Exiting SM") {
		return time.Time{}, false
	}
	line := s[strings.LastIndexByte(s[:i], '\n')+1 : i]
	return logTime(line), true
}

// logTime reads the time an OpenSM log line begins with ("Dec 06 04:02:18
// 995857", local time, no year); the zero time when it cannot.
func logTime(line string) time.Time {
	if len(line) < len("Jan 02 15:04:05 000000") {
		return time.Time{}
	}
	t, err := time.ParseInLocation("Jan 02 15:04:05.000000", line[:15]+"."+line[16:22], time.Local)
	if err != nil {
		return time.Time{}
	}
	now := time.Now()
	return t.AddDate(now.Year(), 0, 0)
}

// mastered says whether it has been master at all.
func (sm *tenantSM) mastered() bool {
	b, _ := os.ReadFile(sm.log)
	return strings.Contains(string(b), "Entering MASTER state")
}

// sweepEnds counts the heavy sweeps that ended in the OpenSM log at path after
// offset: each ends with SUBNET UP or with errors.
func sweepEnds(path string, offset int64) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() < offset {
		offset = 0 // a new log
	}
	if _, err := f.Seek(offset, 0); err != nil {
		return 0
	}
	b, _ := io.ReadAll(f)
	s := string(b)
	return strings.Count(s, "-> SUBNET UP") + strings.Count(s, "Errors during initialization")
}

// markSent notes when a request went out and where the leader's OpenSM log
// stood, while a tenant's fault runs: its job's wait is then measured.
func (r *run) markSent(j *job, sent time.Time) {
	if tf := r.tenant; tf == nil || !tf.active.Load() {
		return
	}
	j.sent = sent
	j.smLog = filepath.Join(r.smDir(r.leader()), "opensm.log")
	if fi, err := os.Stat(j.smLog); err == nil {
		j.smLogAt = fi.Size()
	}
}

// heldInnocent checks a job that is not Completed yet while a tenant's fault
// runs: a job of an innocent tenant held past heldBound and sweepsToHold
// sweeps is a violation, unless the fault may hold everyone (a tenant's
// OpenSM that became master, a cloned GUID named as the reason). It says
// whether the wait is over (a violation stops the run).
func (r *run) heldInnocent(j *job, s jobStatus) bool {
	tf := r.tenant
	if tf == nil || !tf.active.Load() || j.sent.IsZero() || tf.touches(*j) || j.heldSeen {
		return false
	}
	held := time.Since(j.sent)
	if held < heldBound {
		return false
	}
	sweeps := sweepEnds(j.smLog, j.smLogAt)
	if sweeps < sweepsToHold {
		return false
	}
	what := fmt.Sprintf("job %s of %s, whose request touches none of %s, still %s %s after it was sent, %d sweeps later, "+
		"while %s runs: %s (%s)", j.path, j.op, r.hostNames(tf.hosts), s.Status, held.Round(100*time.Millisecond), sweeps,
		tf.kind, s.Summary, firstLine(s.Description))
	switch {
	case tf.kind == faultTenantSM && tf.sm.mastered():
		j.heldSeen = true
		r.res.HeldTolerated++
		r.logf("%s; tolerated: the tenant's OpenSM has been master", what)
		return false
	case tf.kind == faultCloneGUID && strings.TrimSpace(s.Description) != "":
		j.heldSeen = true
		r.res.HeldTolerated++
		r.logf("%s; tolerated: a reason is named", what)
		return false
	}
	r.violation("%s: an innocent tenant's job held", what)
	return true
}

// completedUnderTenantSM is a violation when a job reads Completed while a
// tenant's OpenSM is master and was already master at open, the last time
// the job read not Completed (or when its request was sent): it completed
// while the tenant's OpenSM programmed the ports, when nothing the manager
// applied can be proven. A request that changed nothing, answered with a
// job read Completed before that OpenSM became master and never read open
// since, is not one: the job completed before the fault, and says so.
func (r *run) completedUnderTenantSM(j job, s jobStatus, open time.Time) bool {
	tf := r.tenant
	if tf == nil || tf.sm == nil || !tf.active.Load() {
		return false
	}
	since, master := tf.sm.masterSince()
	if !master || since.IsZero() {
		return false
	}
	if done, ok := r.completedAt[j.path]; ok && open.IsZero() && done.Before(since) {
		return false
	}
	if open.IsZero() {
		open = j.sent
	}
	if !since.Before(open) {
		return false
	}
	r.violation("job %s of %s: Completed while the tenant's OpenSM on %s was master (since %s; the job still read "+
		"not Completed at %s): %s", j.path, j.op, r.hostNames(tf.hosts), since.Format("15:04:05.000000"),
		open.Format("15:04:05.000000"), s.Summary)
	return true
}

func (r *run) hostNames(hs []fabric.GUID) string {
	var names []string
	for _, h := range hs {
		names = append(names, r.hostName(h))
	}
	return strings.Join(names, ", ")
}

// innocentUnder names the tenant's fault a job of another tenant was sent
// under, for its violation's line ("" when none).
func (r *run) innocentUnder(j job) string {
	tf := r.tenant
	if tf == nil || j.sent.IsZero() || tf.touches(j) {
		return ""
	}
	return fmt.Sprintf(" (an innocent tenant's job: sent while %s ran on %s, whose tables its request does not touch)",
		tf.kind, r.hostNames(tf.hosts))
}
