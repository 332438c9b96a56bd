package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/manager"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// --audit's exit statuses besides 0 (the fabric is as recorded) and
// exitFailed (nothing was judged).
const (
	exitAuditBreach   = 6 // a port may reach a partition it must not
	exitAuditFindings = 7 // ports cut off, unreachable or held alone (a host table that lies), no breach
)

// auditHelp is --audit's flag help.
const auditHelp = "read every host port's P_Key table and the switch port facing it, compare them with the recorded state " +
	"and print a table per partition (--json: as JSON), then exit (0: as recorded, 6: an isolation breach, " +
	"7: ports cut off, unreachable or held alone; docs/isolation-proof.md)"

// runAuditCommand runs one audit against the recorded state (not the file
// OpenSM last swept: a change under way shows as findings until it is
// applied). Nothing is recorded: the leader's audits are what the gates use.
func runAuditCommand(ctx context.Context, path, fabricName string, asJSON bool, log *slog.Logger, w io.Writer) error {
	return withOperatorStore(ctx, path, fabricName, log, func(ctx context.Context, f operatorFabric, st *store.Store) error {
		in, err := auditInput(ctx, f.cfg, st)
		if err != nil {
			return err
		}
		s, err := audit.Run(ctx, in)
		manager.CloseIdle(in.Reader) // detached now: the simulator knows no client's exit
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(escape.JSONWriter(w))
			enc.SetIndent("", "  ")
			if err := enc.Encode(s); err != nil {
				return err
			}
		} else if err := printAudit(w, s); err != nil {
			return err
		}
		return auditVerdict(s)
	})
}

// auditInput reads what an audit compares: the recorded state, rendered as
// the applier renders it, and OpenSM's subnet dump.
func auditInput(ctx context.Context, cfg config.FabricConfig, st *store.Store) (audit.Input, error) {
	r, enforcement, err := manager.AuditReader(ctx, cfg, st)
	if err != nil {
		return audit.Input{}, err
	}
	tpl, err := loadTemplate(cfg)
	if err != nil {
		return audit.Input{}, err
	}
	flavour, err := opensm.DetectFlavour(ctx, cfg.OpenSM.Command)
	if err != nil {
		flavour = fabric.Upstream
	}
	text, err := manager.CheckRecordedState(ctx, cfg, st, tpl, flavour)
	if err != nil {
		return audit.Input{}, err
	}
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return audit.Input{}, fmt.Errorf("read recorded state: %w", err)
	}
	topo, err := topology.Load(cfg.OpenSM.SubnetDump())
	if err != nil {
		return audit.Input{}, err
	}
	return audit.Input{File: text, Revision: snap.Revision, Flavour: flavour, Owners: applier.Owners(snap),
		Topology: topo, Reader: r, CheckEnforcement: enforcement}, nil
}

// auditVerdict is --audit's exit status for s.
func auditVerdict(s audit.Summary) error {
	switch {
	case len(s.Breaches()) > 0:
		return status.ExitStatus{Code: exitAuditBreach}
	case !s.Clean():
		return status.ExitStatus{Code: exitAuditFindings}
	}
	return nil
}

// printAudit writes an audit as a table, a line per partition, then every
// finding, each value escaped: an owner is named by its network's name,
// which a tenant chose.
func printAudit(w io.Writer, s audit.Summary) error {
	escape.Fprintf(w, "audit of revision %d: %d host ports, %d read, in %s; switch enforcement %s\n",
		s.Revision, s.Ports, s.Read, s.Took.Round(time.Millisecond), map[bool]string{true: "checked",
			false: "not checked (the fabric does not report it)"}[s.EnforcementChecked])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PKEY\tPARTITION\tMEMBERS\tFINDINGS")
	for _, p := range s.Partitions {
		escape.Fprintf(tw, "0x%04x\t%s\t%d\t%s\n", p.PKey, p.Owner, p.Members, audit.CountsText(p.Findings))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Clean() {
		_, err := fmt.Fprintln(w, "clean: every port holds what the recorded state says, and nothing else")
		return err
	}
	escape.Fprintf(w, "findings (%s):\n", audit.CountsText(s.Counts()))
	for _, f := range s.Findings {
		mark := " "
		switch {
		case f.Breach():
			mark = "!"
		case f.HostOnly:
			mark = "~" // the host's own table lies; its switch port is right: that port held alone
		}
		escape.Fprintf(w, " %s %s: %s\n", mark, f.Kind, f.Text)
	}
	return nil
}
