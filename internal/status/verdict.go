package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// What --status concludes, and how it says so in its exit status. It says
// "every gate is open" only when it could check everything that holds jobs:
// what it cannot see from this host (another host's OpenSM, its subnet dump)
// is said as such, never taken for good news.

// The exit statuses of --status (docs/status.md lists them). --status --json
// exits 0 whenever it printed the object: its not_completing and unchecked
// say the same.
const (
	ExitJobsComplete = 0 // every gate is open, and everything was checked
	ExitFailed       = 1 // the command failed: configuration, database
	ExitJobsHeld     = 3 // jobs do not complete: not_completing names why
	ExitCannotTell   = 4 // nothing found holding jobs, but some could not be checked from this host
)

// ExitStatus is a command's verdict that is not an error: what it printed
// says why; main exits with Code, printing nothing more.
type ExitStatus struct{ Code int }

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Verdict is the exit status for s: nil when jobs complete.
func Verdict(s Status) error {
	switch {
	case len(s.NotCompleting) > 0:
		return ExitStatus{ExitJobsHeld}
	case len(s.Unchecked) > 0:
		return ExitStatus{ExitCannotTell}
	}
	return nil
}

// verdictCode is the exit status a verdict, or a command's error, carries.
func verdictCode(err error) int {
	var es ExitStatus
	switch {
	case err == nil:
		return ExitJobsComplete
	case errors.As(err, &es):
		return es.Code
	}
	return ExitFailed
}

// applierReason says why no manager applies, "" when one does. Without HA the
// leadership row's heartbeat says it; with HA the lease does (readLease), and
// this only says that none ever took it.
func applierReason(cfg config.FabricConfig, l store.Leadership, now time.Time) string {
	if cfg.HA.HA {
		if l.Term == 0 {
			return "no manager has held the applier lock yet"
		}
		return ""
	}
	why := health.LeaderGone(l, now, leader.HeartbeatTimeout)
	if why == "" || l.Term == 0 {
		return why
	}
	return "no manager applies (is one running?): " + why
}

// driverReasons judges this host's OpenSM driver, as the manager last wrote
// it: why it holds jobs, or why it cannot be judged from here. Without HA the
// manager's OpenSM must run for anything to apply; with HA a follower's is
// stopped by design, so only a failing one is a reason.
func driverReasons(cfg config.FabricConfig, d *opensm.Status, file string) (reasons, unchecked []string) {
	if d == nil {
		return nil, []string{fmt.Sprintf("this host's OpenSM: no manager has run on this host (%s does not exist); "+
			"run --status where the manager runs", file)}
	}
	switch {
	case d.State == opensm.StateFailed || d.State == opensm.StateRestarting:
		return []string{fmt.Sprintf("OpenSM on this host is %s since %s: %s",
			d.State, d.Since.Format(time.RFC3339), d.LastError)}, nil
	case !cfg.HA.HA && d.State != opensm.StateRunning:
		return []string{fmt.Sprintf("OpenSM on this host is %s since %s: nothing is applied until it runs "+
			"(is the manager running?)", d.State, d.Since.Format(time.RFC3339))}, nil
	}
	return nil, nil
}

// VerdictSource is where the fabric's verdict is read from: the database
// and OpenSM's subnet dump (through dump, when the manager has one), the
// audit only when one is configured, the freeze only with HA. --status and
// afm_gate_closed judge it as the applier judges what its term holds.
func VerdictSource(cfg config.FabricConfig, st *store.Store, dump *topology.Dump) (verdict.Source, error) {
	src := verdict.Source{Store: st, SubnetDump: cfg.OpenSM.SubnetDump(), Dump: dump, SecondSMs: st}
	if cfg.OpenSM.AuditInterval > 0 {
		src.Audits = st
	}
	// A guid that does not parse leaves no look for a second SM on this
	// manager (the manager warns); a recorded one is named all the same.
	src.Own, _ = cfg.OpenSMGUID()
	if cfg.HA.HA {
		leases, err := st.Leases()
		if err != nil {
			return src, fmt.Errorf("lease: %w", err)
		}
		src.Leases = leases
	}
	return src, nil
}

// readVerdict adds the verdict to s: the reasons every job waits (those
// this host cannot check apart: dumpHere), then each held host port.
func readVerdict(ctx context.Context, cfg config.FabricConfig, st *store.Store, s *Status) error {
	src, err := VerdictSource(cfg, st, nil)
	if err != nil {
		return err
	}
	v, err := src.Judge(ctx)
	if err != nil {
		return fmt.Errorf("gates: %w", err)
	}
	reasons, unchecked := dumpHere(v.Reasons, cfg.OpenSM.SubnetDump())
	s.NotCompleting = append(s.NotCompleting, reasons...)
	s.NotCompleting = append(s.NotCompleting, v.HeldLines()...)
	s.Unchecked = append(s.Unchecked, unchecked...)
	return nil
}

// dumpHere sorts the gates' reasons: a subnet dump this host cannot open (an
// HA follower's, or a host without OpenSM) says nothing of the gate the
// applier evaluates on its own host, so that reason goes to unchecked.
func dumpHere(gates []verdict.Reason, dump string) (reasons, unchecked []string) {
	f, err := os.Open(dump)
	if err == nil {
		f.Close()
		return verdict.Texts(gates), nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
		return verdict.Texts(gates), nil
	}
	for _, r := range gates {
		if r.Kind == verdict.SwitchesUnchecked {
			unchecked = append(unchecked, fmt.Sprintf("%s from this host: %v; run --status on the host whose "+
				"OpenSM sweeps (the applier's)", verdict.SwitchesUncheckedText, err))
			continue
		}
		reasons = append(reasons, r.Text)
	}
	return reasons, unchecked
}
