package verdict

import (
	"context"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Reader is what every judge reads from the database.
type Reader interface {
	ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error)
	EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error)
	DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error)
	GUIDPlaces(ctx context.Context) ([]store.GUIDPlace, error)
}

// AuditReader reads the last recorded audit (store.Store).
type AuditReader interface {
	LastAudit(ctx context.Context) (a store.Audit, ok bool, err error)
}

// SecondSMReader reads the recorded second SM (store.Store).
type SecondSMReader interface {
	SecondSMs(ctx context.Context) ([]store.SecondSM, error)
}

// LeaseReader reads the HA lease, which records the freeze.
type LeaseReader interface {
	ReadLease(ctx context.Context) (store.Lease, error)
}

// Source reads the Evidence from the database and the subnet dump: what
// --status and the metrics judge. The applier reads only the rows of Reader
// through it and fills the rest from its term.
type Source struct {
	Store      Reader
	SubnetDump string // <dump_files_dir>/opensm-subnet.lst; "": not configured
	// Dump reads SubnetDump, parsing it only when its content changed; nil:
	// read it whole at every evaluation.
	Dump *topology.Dump
	// Audits reads the last audit; nil: no audit is configured, so none
	// holds jobs (nothing would ever clear its findings).
	Audits AuditReader
	// SecondSMs reads the recorded second SM; nil: none is looked for.
	SecondSMs SecondSMReader
	Own       fabric.GUID // this manager's OpenSM's port, named in the second SM's reason
	// Leases reads the freeze; nil: no HA.
	Leases LeaseReader
}

// Evidence reads the evidence. An error (the database could not be read)
// leaves the gates closed for whoever asked: no verdict is made of part of it.
func (s Source) Evidence(ctx context.Context) (Evidence, error) {
	var ev Evidence
	var err error
	if ev.Expected, err = s.Store.ExpectedSwitches(ctx); err != nil {
		return Evidence{}, err
	}
	if ev.EnforcementErrors, err = s.Store.EnforcementErrors(ctx); err != nil {
		return Evidence{}, err
	}
	if ev.Duplicates, err = s.Store.DuplicateGUIDs(ctx); err != nil {
		return Evidence{}, err
	}
	if ev.Places, err = s.Store.GUIDPlaces(ctx); err != nil {
		return Evidence{}, err
	}
	ev.SubnetDump = s.SubnetDump
	if (len(ev.Expected) > 0 || len(ev.Places) > 0) && s.SubnetDump != "" {
		ev.Dump = s.readDump()
	}
	if err := s.readRecorded(ctx, &ev); err != nil {
		return Evidence{}, err
	}
	return ev, nil
}

// readRecorded reads the audit, the second SM and the freeze, where asked.
func (s Source) readRecorded(ctx context.Context, ev *Evidence) error {
	if s.Audits != nil {
		last, ok, err := s.Audits.LastAudit(ctx)
		if err != nil {
			return fmt.Errorf("last audit: %w", err)
		}
		if ok {
			ev.Audit = AuditOf(last)
		}
	}
	ev.SecondSM.Own = s.Own
	if s.SecondSMs != nil {
		sms, err := s.SecondSMs.SecondSMs(ctx)
		if err != nil {
			return fmt.Errorf("second subnet manager: %w", err)
		}
		if len(sms) > 0 {
			ev.SecondSM.Master = &sms[0] // the leader records one
		}
	}
	if s.Leases != nil {
		l, err := s.Leases.ReadLease(ctx)
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		ev.Freeze = l.Freeze
	}
	return nil
}

// readDump reads the subnet dump, through Dump when there is one.
func (s Source) readDump() Dump {
	if s.Dump != nil {
		topo, err := s.Dump.Load()
		return Dump{Topo: topo, Err: err}
	}
	topo, err := topology.Load(s.SubnetDump)
	return Dump{Topo: topo, Err: err}
}

// Judge reads the evidence and judges it.
func (s Source) Judge(ctx context.Context) (Verdict, error) {
	ev, err := s.Evidence(ctx)
	if err != nil {
		return Verdict{}, err
	}
	return Judge(ev), nil
}

// Closed returns why jobs may not complete now; none when every gate is
// open. An error means the gates are closed too.
func (s Source) Closed(ctx context.Context) ([]Reason, error) {
	v, err := s.Judge(ctx)
	return v.Reasons, err
}
