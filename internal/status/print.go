package status

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Print writes the status for a person to read.
func Print(w io.Writer, s Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	printProgress(tw, s)
	if l := s.Lease; l != nil {
		printLease(tw, l)
	}
	printAdopted(tw, s.Adopted)
	printAudit(tw, s.Audit)
	printForeignSMs(tw, s.ForeignSMs)
	for _, h := range s.ReservedHeld {
		escape.Fprintf(tw, "reserved GUID:\t%s\n", h)
	}
	printHosts(tw, s.Hosts)
	if d := s.Driver; d == nil {
		fmt.Fprintln(tw, "OpenSM driver:\tno manager has run on this host")
	} else {
		escape.Fprintf(tw, "OpenSM driver:\t%s\n", DriverLine(*d))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printList(w, "jobs do not complete:", s.NotCompleting)
	printList(w, "cannot be checked from this host:", s.Unchecked)
	if len(s.NotCompleting) == 0 && len(s.Unchecked) == 0 {
		fmt.Fprintln(w, "jobs complete: every gate is open")
	}
	return nil
}

// printList writes a heading and each item on its own line, escaped: an
// item may quote a tenant's names (an audit's finding), and must not start a
// line of its own.
func printList(w io.Writer, heading string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintln(w, heading)
	for _, item := range items {
		escape.Fprintf(w, "  - %s\n", item)
	}
}

// printProgress writes the applier lock's, the revision's, the last
// apply's and the jobs' lines of --status.
func printProgress(w io.Writer, s Status) {
	if s.Applier.Term == 0 {
		fmt.Fprintln(w, "applier lock:\tnever held")
	} else {
		heartbeat := "never"
		if s.Applier.Heartbeat != nil {
			heartbeat = s.Applier.Heartbeat.Format(time.RFC3339)
		}
		escape.Fprintf(w, "applier lock:\t%s, term %d, heartbeat %s\n", s.Applier.Holder, s.Applier.Term, heartbeat)
	}
	escape.Fprintf(w, "current revision:\t%d\n", s.Revision)
	if s.LastApply == nil {
		fmt.Fprintln(w, "last apply:\tnone")
	} else {
		a := s.LastApply
		escape.Fprintf(w, "last apply:\trevision %d, %s (%s), finished %s, term %d\n",
			a.Revision, a.Outcome, a.Detail, a.FinishedAt.Format(time.RFC3339), a.Term)
	}
	escape.Fprintf(w, "jobs:\tPending %d, Running %d, Completed %d, Failed %d\n", s.Jobs[store.StatusPending],
		s.Jobs[store.StatusRunning], s.Jobs[store.StatusCompleted], s.Jobs[store.StatusFailed])
	if s.OldestOpenJob == nil {
		fmt.Fprintln(w, "oldest open job:\tnone")
	} else {
		escape.Fprintf(w, "oldest open job:\tcreated %s\n", s.OldestOpenJob.Format(time.RFC3339))
	}
}

// printLease writes the HA lease's lines of --status.
func printLease(w io.Writer, l *Lease) {
	expiry := ""
	if l.ExpiresAt != nil && l.ExpiresIn != nil {
		expiry = fmt.Sprintf(", expires %s (in %.1f s)", l.ExpiresAt.Format(time.RFC3339), *l.ExpiresIn)
	}
	switch {
	case l.Term == 0:
		fmt.Fprintln(w, "lease:\tnever taken")
	case l.Holder != "":
		escape.Fprintf(w, "lease:\theld by %s, term %d%s\n", l.Holder, l.Term, expiry)
	case l.ExpiresAt == nil:
		escape.Fprintf(w, "lease:\tfree (released by %s, term %d)\n", l.LastHolder, l.Term)
	default:
		escape.Fprintf(w, "lease:\tfree: expired, not released, by %s, term %d%s\n", l.LastHolder, l.Term, expiry)
	}
	if l.PreviousHolder != "" {
		how := "released"
		if l.PreviousExpired {
			how = "expired instead of being released"
		}
		escape.Fprintf(w, "previous lease:\t%s, %s\n", l.PreviousHolder, how)
	}
	if l.Freeze == "" {
		fmt.Fprintln(w, "freeze:\tnone")
		return
	}
	escape.Fprintf(w, "freeze:\tFROZEN: check %s\n", l.Check)
	if l.UnfreezePending {
		fmt.Fprintln(w, "unfreeze:\tpending: requested, not yet taken by the leader (its OpenSM is not master yet)")
	} else {
		fmt.Fprintln(w, "unfreeze:\tnot requested: once that OpenSM is stopped, run --unfreeze")
	}
}

// DriverLine is the driver's status on one line.
func DriverLine(d opensm.Status) string {
	line := fmt.Sprintf("%s since %s, %d restarts", d.State, d.Since.Format(time.RFC3339), d.Restarts)
	if d.PID != 0 {
		line += fmt.Sprintf(", pid %d", d.PID)
	}
	if d.LastError != "" {
		line += fmt.Sprintf("; last error at %s: %s", d.LastErrorAt.Format(time.RFC3339), d.LastError)
	}
	return line
}

// PrintDrivers writes this host's OpenSM driver line of each fabric, as far
// as it can be read: what --status can say without the database.
func PrintDrivers(w io.Writer, fabrics []Fabric) {
	for _, f := range fabrics {
		d, err := opensm.ReadStatus(f.Config.OpenSM.DriverStatusFile())
		switch {
		case err != nil:
		case len(fabrics) == 1 && len(f.Config.Fabrics) == 1: // as Run prints a file of one fabric
			escape.Fprintf(w, "OpenSM driver: %s\n", DriverLine(d))
		default:
			escape.Fprintf(w, "fabric %s: OpenSM driver: %s\n", f.Name, DriverLine(d))
		}
	}
}
