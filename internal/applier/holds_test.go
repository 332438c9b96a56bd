package applier

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestHeldPortsRestoredByANewTerm: an audit that finds a host table lying
// while its switch port is right holds that port only (no gate), names it
// in the reason a place on it is unproven with, and its record gives a new
// term the same hold; an audit that finds it right releases it. On every
// engine: the hold travels in last_audit's summary.
func TestHeldPortsRestoredByANewTerm(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { testHeldPortsRestored(t, engine) })
	}
}

func testHeldPortsRestored(t *testing.T, engine string) {
	const liar, honest fabric.GUID = 0x0002c90300000301, 0x0002c90300000101
	lie := audit.Finding{Kind: audit.ForeignPKey, Port: liar, PKey: 0x64, HostOnly: true,
		Text: "port 0x0002c90300000301 holds pkey 0x0064 (network blue) as a full member but is not recorded in it"}
	s := audit.Summary{Started: time.Now(), Findings: []audit.Finding{lie}}
	st := storetest.Open(t, engine)
	id, err := st.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	newTerm := func() *term {
		return &term{id: id, Applier: &Applier{Store: st, Log: slog.New(slog.DiscardHandler), Cfg: Config{
			Audit: AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{}, Recorder: st}}}}
	}
	first := newTerm()
	auditActs(t.Context(), first, s)
	if breaches := append(first.audit.judged.Of(GateIsolationBreach), first.audit.judged.Of(GateSwitchNotEnforcing)...); len(breaches) != 0 {
		t.Errorf("a host-only finding closed a gate: %+v", breaches)
	}
	wants := []pkeyread.Want{{Port: liar, PKey: 0x65, Membership: pkeyread.Full}, {Port: honest, PKey: 0x64, Membership: pkeyread.Full}}
	got := first.heldReasons(wants)
	if len(got) != 1 || !strings.HasPrefix(got[0], "port 0x0002c90300000301 is held: ") || !strings.Contains(got[0], "pkey 0x0064") {
		t.Errorf("reasons of the wants: %q; want the liar's only, with the finding", got)
	}

	second := newTerm()
	second.loadAudit(t.Context())
	if ports := second.heldPorts(); len(ports) != 1 || ports[liar] != lie.Text {
		t.Errorf("a new term's holds: %v; want the liar's", ports)
	}
	auditActs(t.Context(), second, audit.Summary{Started: time.Now()})
	if ports := second.heldPorts(); len(ports) != 0 || !slices.Equal(second.heldReasons(wants), nil) {
		t.Errorf("holds after a clean audit: %v", ports)
	}
}

// auditActs acts on s as the term's audit service does, in the term's idle
// turn, and gives the term what it asked.
func auditActs(ctx context.Context, t *term, s audit.Summary) {
	tv := t.turnView(nil)
	t.newAuditor(nil).actOnAudit(ctx, tv, s)
	t.takeTurn(tv)
}
