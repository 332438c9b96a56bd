package store

import (
	"context"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A Kubernetes pkey's QoS is UFM's mtu_limit, service_level and rate_limit.
// A pkey has none until a client sets it (ib-kubernetes never does): POST
// /resources/pkeys with a QoS field and PUT /resources/pkeys/qos_conf set
// what they name, the rest starting from UFM's defaults (fabric.DefaultQoS). A QoS change is a
// change like any other: a revision, a job, the same sweep and read-back
// proof; the partitions file and the QoS policy file carry it to OpenSM.

// QoSChange is what a request sets of a pkey's QoS; nil keeps the recorded
// value (UFM's default for a pkey whose QoS was never set).
type QoSChange struct {
	MTULimit     *int
	ServiceLevel *int
	// RateMbps is rate_limit in Mb/s (fabric.RateMbpsOf).
	RateMbps *int
}

// Empty says whether the change sets nothing.
func (c QoSChange) Empty() bool {
	return c.MTULimit == nil && c.ServiceLevel == nil && c.RateMbps == nil
}

// on returns q with the change's values in place.
func (c QoSChange) on(q fabric.QoS) fabric.QoS {
	if c.MTULimit != nil {
		q.MTULimit = *c.MTULimit
	}
	if c.ServiceLevel != nil {
		q.ServiceLevel = *c.ServiceLevel
	}
	if c.RateMbps != nil {
		q.RateMbps = *c.RateMbps
	}
	return q
}

// check refuses a value UFM would not take, before any read: each value set
// is checked in place of a valid default.
func (c QoSChange) check(pkey fabric.PKey) error {
	if err := c.on(fabric.DefaultQoS).Check(); err != nil {
		return rejectf("pkey %s: %v", pkey, err)
	}
	return nil
}

// KubernetesQoS is a PUT of UFM's /resources/pkeys/qos_conf: the QoS of a
// recorded Kubernetes pkey.
type KubernetesQoS struct {
	PKey      fabric.PKey
	QoS       QoSChange
	CreatedBy string
	Request   string
	RequestID string
}

// SetKubernetesQoS sets a recorded Kubernetes pkey's QoS; ErrNotFound when it
// is not recorded. Its members keep their memberships: the change promises
// them as they are, and the sweep that rewrites their statement proves it.
func (s *Store) SetKubernetesQoS(ctx context.Context, q KubernetesQoS) (Job, error) {
	if err := s.rules.checkKubernetesPKey(q.PKey); err != nil {
		return Job{}, err
	}
	if q.QoS.Empty() {
		return Job{}, rejectf("pkey %s: no QoS to set: give mtu_limit, service_level or rate_limit", q.PKey)
	}
	if err := q.QoS.check(q.PKey); err != nil {
		return Job{}, err
	}
	return s.record(ctx, s.kubeGroups, "set QoS of pkey", q.PKey.String(), func(ctx context.Context, tx *changeTx) (Job, error) {
		if _, err := tx.q.GetKubernetesPKey(ctx, s.FabricName(), q.PKey); err != nil {
			return Job{}, notFound(err)
		}
		rev, err := tx.touches(ctx, true)
		if err != nil {
			return Job{}, err
		}
		if err := setQoS(ctx, tx, q.PKey, q.QoS, rev); err != nil {
			return Job{}, err
		}
		if err := promiseKubernetesMembers(ctx, tx, q.PKey, false); err != nil {
			return Job{}, err
		}
		row, err := tx.q.GetKubernetesPKey(ctx, s.FabricName(), q.PKey)
		if err != nil {
			return Job{}, fmt.Errorf("read pkey %s back: %w", q.PKey, err)
		}
		text := qosText(qosOf(row))
		return kubernetesChanged(ctx, tx, rev, q.PKey, Job{
			Operation:   OpSetKubernetesQoS,
			Description: fmt.Sprintf("Set the QoS of Kubernetes pkey %s: %s", q.PKey, text),
			Result:      fmt.Sprintf("Kubernetes pkey %s has QoS %s", q.PKey, text),
			CreatedBy:   q.CreatedBy, Request: q.Request, RequestID: q.RequestID,
		})
	})
}

// setQoS writes a change of pkey's QoS over what is recorded, at revision
// rev; an empty change, or one that sets what is recorded, writes nothing.
// The pkey's row exists.
func setQoS(ctx context.Context, tx *changeTx, pkey fabric.PKey, c QoSChange, rev int64) error {
	if c.Empty() {
		return nil
	}
	row, err := tx.q.GetKubernetesPKey(ctx, tx.fabric, pkey)
	if err != nil {
		return fmt.Errorf("read the QoS of pkey %s: %w", pkey, err)
	}
	if sameQoS(c, row) {
		// Nothing to write; and MySQL counts no row changed when an
		// addition's upsert of the pkey already wrote its revision.
		return nil
	}
	q := c.on(recordedQoS(row))
	n, err := tx.q.SetKubernetesPKeyQoS(ctx, tx.fabric, int64(q.MTULimit), int64(q.ServiceLevel), int64(q.RateMbps),
		rev, tx.now, pkey)
	switch {
	case err != nil:
		return fmt.Errorf("set the QoS of pkey %s: %w", pkey, err)
	case n != 1:
		return fmt.Errorf("set the QoS of pkey %s: %d rows changed, want 1", pkey, n)
	}
	return nil
}

// qosOf is a pkey row's QoS: none (the zero QoS) until a client set it, so
// that its partition keeps the line it had without one.
func qosOf(p driver.KubernetesPKey) fabric.QoS {
	if !p.QosSet {
		return fabric.QoS{}
	}
	return recordedQoS(p)
}

// recordedQoS is a pkey row's QoS columns, set or not: an unset pkey's are
// UFM's defaults, what a first change of one field starts from.
func recordedQoS(p driver.KubernetesPKey) fabric.QoS {
	return fabric.QoS{MTULimit: int(p.MtuLimit), ServiceLevel: int(p.ServiceLevel), RateMbps: int(p.RateLimitMbps)}
}

// qosText is a QoS as a job's texts name it, in UFM's words.
func qosText(q fabric.QoS) string {
	return fmt.Sprintf("mtu_limit %d, service_level %d, rate_limit %s", q.MTULimit, q.ServiceLevel,
		fabric.FormatRate(q.RateMbps))
}
