package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The parts of the status that hold no job themselves: the adopted
// partitions, the last audit and the foreign SMs (what of them holds jobs is
// the verdict's: readVerdict).

// Adopted is one adopted partition as --status shows it.
type Adopted struct {
	PKey string `json:"pkey"`
	Name string `json:"name"`
	// Owner is what has the pkey now: "network <id>", "Kubernetes pkey",
	// "the flat partition"; "" while the adopted partition is written as it is.
	Owner   string          `json:"owner"`
	Members []AdoptedMember `json:"members"`
	// Flags are the header's flags as the running file wrote them (ipoib,
	// mtu=4...), written while no owner has the pkey.
	Flags    []string `json:"flags"`
	Revision int64    `json:"revision"`
}

// AdoptedMember is one adopted member.
type AdoptedMember struct {
	GUID       string `json:"guid"`
	Membership string `json:"membership"`
}

// readAdopted reads the adopted partitions and who owns their pkeys.
func readAdopted(ctx context.Context, cfg config.FabricConfig, st *store.Store) ([]Adopted, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("adopted partitions: %w", err)
	}
	owners := map[fabric.PKey]string{cfg.OpenSM.FlatPKey: "the flat partition"}
	for _, n := range snap.Networks {
		if n.PKey != nil {
			owners[*n.PKey] = "network " + n.ID
		}
	}
	for _, k := range snap.Kubernetes {
		owners[k.PKey] = "Kubernetes pkey"
	}
	out := []Adopted{}
	for _, a := range snap.Adopted {
		s := Adopted{PKey: a.PKey.String(), Name: a.Statement.Name, Owner: owners[a.PKey],
			Members: []AdoptedMember{}, Flags: []string{}, Revision: a.Revision}
		for _, m := range a.Statement.Members {
			s.Members = append(s.Members, AdoptedMember{GUID: m.GUID.String(), Membership: string(m.Membership)})
		}
		for _, f := range a.Statement.Flags {
			s.Flags = append(s.Flags, strings.TrimSuffix(f.Name+"="+f.Value, "="))
		}
		out = append(out, s)
	}
	return out, nil
}

// printAdopted writes --status's line for each adopted partition.
func printAdopted(w io.Writer, adopted []Adopted) {
	for _, a := range adopted {
		owner := "no owner yet: written as the running file had it"
		if a.Owner != "" {
			owner = "owned by " + a.Owner + ": its members beside the owner's until released"
		}
		escape.Fprintf(w, "adopted:\tpkey %s (%s), %d members, %s\n", a.PKey, a.Name, len(a.Members), owner)
	}
}

// Audit is the last audit as --status shows it.
type Audit struct {
	Interval  float64            `json:"interval_seconds"` // 0: off
	StartedAt *time.Time         `json:"started_at"`       // nil: never ran
	Revision  int64              `json:"revision"`
	Findings  int64              `json:"findings"`
	Breaches  int64              `json:"breaches"`
	Counts    map[audit.Kind]int `json:"counts"`
}

// readAudit reads the last audit into s; its breaches and held ports are
// the verdict's (readVerdict).
func readAudit(ctx context.Context, cfg config.FabricConfig, st *store.Store, s *Status) error {
	last, ok, err := st.LastAudit(ctx)
	if err != nil {
		return err
	}
	a := &Audit{Interval: cfg.OpenSM.AuditInterval.Seconds()}
	s.Audit = a
	if !ok {
		return nil
	}
	a.StartedAt, a.Revision, a.Findings, a.Breaches = &last.StartedAt, last.Revision, last.Findings, last.Breaches
	var sum audit.Summary
	if err := json.Unmarshal(last.Summary, &sum); err == nil {
		a.Counts = sum.Counts()
	}
	return nil
}

// printAudit writes --status's audit line.
func printAudit(w io.Writer, a *Audit) {
	switch {
	case a == nil:
	case a.StartedAt == nil && a.Interval == 0:
		fmt.Fprintln(w, "last audit:\tnone (audit_interval = 0)")
	case a.StartedAt == nil:
		fmt.Fprintln(w, "last audit:\tnone yet")
	default:
		escape.Fprintf(w, "last audit:\t%s, revision %d: %d findings (%s), %d breaches\n",
			a.StartedAt.Format(time.RFC3339), a.Revision, a.Findings, audit.CountsText(a.Counts), a.Breaches)
	}
}

// ForeignSM is a foreign subnet manager as --status --json shows it: MASTER
// by its own SMInfo, master of no port.
type ForeignSM struct {
	PortGUID string    `json:"port_guid"`
	Priority int       `json:"priority"`
	State    string    `json:"state"`
	OwnState string    `json:"own_state"` // the leader's OpenSM's then
	Term     int64     `json:"term"`      // the term that saw it
	SeenAt   time.Time `json:"seen_at"`
}

// readForeignSMs adds the foreign subnet managers to the status, which hold
// no job; the recorded second SM, which holds every one, is the verdict's
// (readVerdict).
func readForeignSMs(ctx context.Context, st *store.Store, s *Status) error {
	foreign, err := st.ForeignSMs(ctx)
	if err != nil {
		return err
	}
	s.ForeignSMs = make([]ForeignSM, 0, len(foreign))
	for _, sm := range foreign {
		s.ForeignSMs = append(s.ForeignSMs, ForeignSM{PortGUID: sm.PortGUID.String(), Priority: sm.Priority,
			State: sm.State, OwnState: sm.OwnState, Term: sm.Term, SeenAt: sm.SeenAt})
	}
	return nil
}

// printForeignSMs writes the foreign SMs' line of --status: none, or each
// one, master of no port (no job waits for it), to be stopped all the same.
func printForeignSMs(w io.Writer, sms []ForeignSM) {
	if len(sms) == 0 {
		fmt.Fprintln(w, "foreign SMs:\tnone")
		return
	}
	for _, sm := range sms {
		escape.Fprintf(w, "foreign SM:\tport %s (priority %d, %s), master of no port (this manager's OpenSM %s), "+
			"seen by term %d at %s; no job waits for it; stop it (docs/runbooks.md)\n", sm.PortGUID, sm.Priority, sm.State,
			sm.OwnState, sm.Term, sm.SeenAt.Format(time.RFC3339))
	}
}
