package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The GUIDs no client may name (docs/security.md): every manager's own
// subnet manager port, on every fabric of the database, and [api]
// reserved_guids (Rules.ReservedGUIDs). Switches are refused by the port
// limit, which reads OpenSM's subnet dump (topology.PortLimit).
//
// Each manager records its fabrics' SM ports when it starts, leader or not:
// an HA standby's OpenSM is stopped, but its port is the master's as soon as
// that manager leads, and a tenant in its partition would then sit beside
// the port that programs every other.

// SMPort is the port a manager's OpenSM runs on, as that manager recorded it.
type SMPort struct {
	Fabric string
	GUID   fabric.GUID
	Holder string // the manager that recorded it last: "<host> pid <pid>"
	SeenAt time.Time
}

// maxHolder is the holder column's size.
const maxHolder = 255

// RecordSMPort records guid as the port s's fabric's OpenSM runs on, for the
// manager holder. It is not fenced: every manager records its own.
func (s *Store) RecordSMPort(ctx context.Context, guid fabric.GUID, holder string) error {
	if guid == 0 {
		return fmt.Errorf("record the subnet manager's port: want a non-zero GUID")
	}
	if len(holder) > maxHolder {
		holder = holder[:maxHolder]
	}
	if err := s.d.Queries(ctx).UpsertSMPort(ctx, s.FabricName(), guid.String(), holder, s.now()); err != nil {
		return fmt.Errorf("record the subnet manager's port %s: %w", guid, err)
	}
	return nil
}

// SMPorts returns the subnet manager ports every manager recorded, of every
// fabric, by GUID.
func (s *Store) SMPorts(ctx context.Context) ([]SMPort, error) {
	return tx{s.d.Queries(ctx), s.FabricName()}.smPorts(ctx)
}

// smPorts is SMPorts in t.
func (t tx) smPorts(ctx context.Context) ([]SMPort, error) {
	rows, err := t.q.SMPorts(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the subnet managers' ports: %w", err)
	}
	out := make([]SMPort, 0, len(rows))
	for _, r := range rows {
		guid, err := fabric.ParseGUID(r.PortGuid)
		if err != nil {
			return nil, fmt.Errorf("read the subnet managers' ports: port %q: %w", r.PortGuid, err)
		}
		out = append(out, SMPort{Fabric: r.Fabric, GUID: guid, Holder: r.Holder, SeenAt: r.SeenAt.UTC()})
	}
	return out, nil
}

// ReservedCheck says why a client may not name guid ("" when it may).
type ReservedCheck func(guid fabric.GUID) (refusal string)

// reservedCheck reads the recorded subnet manager ports and returns the
// check of them and of the rules' ReservedGUIDs. A Kubernetes change reads it
// before its transaction, as the port limit's dump is, not under the
// revision's lock: a port recorded as an SM's while a change naming it
// commits is the case of a GUID reserved after it was recorded (ReservedHeld
// names it). A port's change reads the SM ports with its rows instead, under
// the lock, in the same statement (readPortState): no round trip of its own,
// and a port recorded as an SM's before that statement is refused.
func (s *Store) reservedCheck(ctx context.Context) (ReservedCheck, error) {
	sms, err := s.SMPorts(ctx)
	if err != nil {
		return nil, orGaveUp(ctx, err)
	}
	return s.rules.reserved(sms), nil
}

// reserved is the check of the SM ports sms and of r.ReservedGUIDs.
func (r Rules) reserved(sms []SMPort) ReservedCheck {
	configured := slices.Clone(r.ReservedGUIDs)
	return func(guid fabric.GUID) string {
		for _, sm := range sms {
			if sm.GUID == guid {
				return fmt.Sprintf("GUID %s is the port of a subnet manager (fabric %s's OpenSM): "+
					"no client may name a subnet manager's port", guid, sm.Fabric)
			}
		}
		if slices.Contains(configured, guid) {
			return fmt.Sprintf("GUID %s is in [api] reserved_guids: no client may name it", guid)
		}
		return ""
	}
}

// ReservedHeld names each membership of s's fabric whose GUID is reserved
// now but was recorded before it was: a port or a Kubernetes member whose
// GUID became a manager's subnet manager port, or was added to [api]
// reserved_guids, afterwards. Such a membership stays (taking it away would
// cut a tenant's running port without a request of its owner); --status
// names it for the operator, and a change that names the GUID again is
// refused, so its owner's next update of it fails until the operator acts.
func (s *Store) ReservedHeld(ctx context.Context) ([]string, error) {
	check, err := s.reservedCheck(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the recorded memberships: %w", err)
	}
	var out []string
	for _, m := range snap.Members {
		if why := check(m.GUID); why != "" {
			out = append(out, fmt.Sprintf("port %s of network %s holds it: %s", m.PortID, m.NetworkID, why))
		}
	}
	for _, k := range snap.Kubernetes {
		for _, m := range k.Members {
			if why := check(m.GUID); why != "" {
				out = append(out, fmt.Sprintf("Kubernetes pkey %s holds it: %s", k.PKey, why))
			}
		}
	}
	return out, nil
}

// orGaveUp is err, a read's failure, or, when the caller's context ended or
// is past its deadline, the context's error with err's text: the read failed
// because the caller gave up, and says so. A dial cut by the deadline is a
// net error ("i/o timeout"), returned at the deadline's instant, before the
// context's own timer may have marked it done.
func orGaveUp(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(d) {
		cerr = context.DeadlineExceeded
	}
	if cerr == nil {
		return err
	}
	return fmt.Errorf("%w (%v)", cerr, err)
}
