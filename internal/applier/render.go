package applier

import (
	"context"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The render pipeline: a recorded state, less what its GUIDs cannot carry
// (withhold), turned into the file's state (State), rendered by the template
// and checked. The applier writes from it, --render prints it and the
// manager's start refuses what it finds: one pipeline, so that what is
// checked is what is written.
//
// It stays beside the applier rather than in internal/partitions: it reads
// the store's snapshot and the capacity of the fabric's switch ports, which
// the file's format knows nothing of.

// RenderInput is what a render reads, and nothing of the applier's other
// settings.
type RenderInput struct {
	DefaultPartition string
	FlatPKey         fabric.PKey          // [opensm] flat_pkey, the flat networks' partition
	Template         *partitions.Template // nil: the built-in one
	// Rules are what the check accepts; their Flavour is the OpenSM that
	// reads the file.
	Rules partitions.Rules
	// PortLimit finds the Kubernetes memberships a GUID cannot carry
	// wherever it is linked (its template's static partitions counted);
	// nil: none is left out.
	PortLimit CapacityChecker
}

// Rendered is a render's result.
type Rendered struct {
	State partitions.State // what the file was rendered from
	// Text is the file; nil when the template failed (then Problems says
	// why).
	Text []byte
	// QoSPolicy is the QoS policy file of State (partitions.RenderQoSPolicy):
	// the Kubernetes pkeys' SL, MTU and rate limits of their paths; nil when
	// no pkey's QoS is set (OpenSM then runs without qos).
	QoSPolicy []byte
	// Problems is the verdict of the template and of the check
	// (*partitions.Error lists the check's): a file with problems is never
	// written. nil: the file may be written.
	Problems error
}

// RenderInput is what the applier's renders read of its configuration.
func (c Config) RenderInput() RenderInput {
	return RenderInput{DefaultPartition: c.DefaultPartition, FlatPKey: c.FlatPKey, Template: c.Template,
		Rules: c.Rules, PortLimit: c.PortLimit}
}

// Render renders the partitions file of the recorded state snap as in says
// and checks it. The Kubernetes memberships a GUID cannot carry wherever it
// is linked are left out (withhold). The error is ctx's when it ended before
// a verdict; the file's own problems are the result's.
func Render(ctx context.Context, snap store.Snapshot, in RenderInput) (Rendered, error) {
	snap, _ = withhold(snap, in.PortLimit)
	return renderWithheld(ctx, snap, in)
}

// renderWithheld is Render of a snapshot already withheld from.
func renderWithheld(ctx context.Context, snap store.Snapshot, in RenderInput) (Rendered, error) {
	r := Rendered{State: State(snap, in.DefaultPartition, in.FlatPKey)}
	r.State.Rules = in.Rules
	tpl := in.Template
	if tpl == nil {
		tpl = partitions.BuiltinTemplate()
	}
	r.Text, r.Problems = tpl.Render(ctx, r.State)
	r.QoSPolicy = partitions.RenderQoSPolicy(r.State, r.Text)
	if r.Problems != nil && ctx.Err() != nil {
		return Rendered{}, ctx.Err() // no verdict on the file
	}
	if r.Problems == nil {
		r.Problems = partitions.Check(r.Text, r.State)
	}
	return r, nil
}
