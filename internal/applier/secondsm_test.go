package applier

import (
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

func TestJudgeMasters(t *testing.T) {
	const own, other fabric.GUID = 0x0002c90300a00001, 0x0002c90300a10001
	sm := func(guid fabric.GUID, priority uint8, state pkeyread.SMState) pkeyread.SMInfo {
		lid := uint16(1)
		if guid != own {
			lid = uint16(guid>>16) & 0xff // a LID of its own: 0xa1 for other
		}
		return pkeyread.SMInfo{GUID: guid, Priority: priority, State: state, LID: lid}
	}
	for _, tc := range []struct {
		name string
		m    pkeyread.Masters
		sms  []pkeyread.SMInfo // behind the other ports
		// masterLIDs counts the host ports by the master they name.
		masterLIDs  map[uint16]int
		unprotected int // host ports without M_Key protection
		wantFound   *store.SecondSM
		wantForeign []store.SecondSM // master of nothing: named, no gate
		wantKnown   bool
		wantText    []string // in the gate's reason
	}{
		{name: "own master", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			wantKnown: true},
		{name: "no master swept the port yet", m: pkeyread.Masters{OwnLID: 1}},
		{name: "no master swept the port yet, own discovering", m: pkeyread.Masters{OwnLID: 1, Own: sm(own, 1, pkeyread.SMDiscovering)}},
		{name: "own discovering (a restart)", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMDiscovering), Own: sm(own, 1, pkeyread.SMDiscovering)}},
		{name: "the named master is gone, own master again", m: pkeyread.Masters{MasterLID: 2, OwnLID: 1, Own: sm(own, 1, pkeyread.SMMaster)},
			wantKnown: true},
		{name: "the named master is gone, own still standby", m: pkeyread.Masters{MasterLID: 2, OwnLID: 1, Own: sm(own, 1, pkeyread.SMStandby)},
			wantFound: &store.SecondSM{PortGUID: own, Priority: 1, State: "STANDBY", OwnState: "STANDBY"}, wantKnown: true},
		{name: "a master behind another port, master of the host ports, before any swept the own port", m: pkeyread.Masters{OwnLID: 1, Own: sm(own, 1, pkeyread.SMDiscovering)},
			sms: []pkeyread.SMInfo{sm(other, 15, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{0xa1: 4},
			wantFound: &store.SecondSM{PortGUID: other, Priority: 15, State: "MASTER", OwnState: "DISCOVERING"}, wantKnown: true},
		{name: "a master behind another port, master of nothing, before any swept the own port", m: pkeyread.Masters{OwnLID: 1, Own: sm(own, 1, pkeyread.SMDiscovering)},
			sms: []pkeyread.SMInfo{sm(other, 15, pkeyread.SMMaster)}},
		{name: "a higher priority took over", m: pkeyread.Masters{MasterLID: 2, OwnLID: 1, Master: sm(other, 15, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMStandby)},
			wantFound: &store.SecondSM{PortGUID: other, Priority: 15, State: "MASTER", OwnState: "STANDBY"}, wantKnown: true,
			wantText: []string{"port 0x0002c90300a10001 (priority 15, MASTER)", "port 0x0002c90300a00001, STANDBY"}},
		{name: "another master while own still says master", m: pkeyread.Masters{MasterLID: 2, OwnLID: 1, Master: sm(other, 0, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			wantFound: &store.SecondSM{PortGUID: other, Priority: 0, State: "MASTER", OwnState: "MASTER"}, wantKnown: true,
			wantText: []string{"port 0x0002c90300a10001 (priority 0, MASTER)"}},
		{name: "own standby, named master of itself", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMStandby), Own: sm(own, 1, pkeyread.SMStandby)},
			wantFound: &store.SecondSM{PortGUID: own, Priority: 1, State: "STANDBY", OwnState: "STANDBY"}, wantKnown: true,
			wantText: []string{"this manager's OpenSM (port 0x0002c90300a00001) is STANDBY"}},
		{name: "a master with another SM_Key beside the own one, master of host ports", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(0x0002c90300a20001, 0, pkeyread.SMStandby), sm(other, 3, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{1: 3, 0xa1: 1},
			wantFound: &store.SecondSM{PortGUID: other, Priority: 3, State: "MASTER", OwnState: "MASTER"}, wantKnown: true,
			wantText: []string{"port 0x0002c90300a10001 (priority 3, MASTER)"}},
		{name: "a tenant's SM beside the own master, master of nothing", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(0x0002c90300a20001, 0, pkeyread.SMStandby), sm(other, 3, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{1: 4},
			wantForeign: []store.SecondSM{{PortGUID: other, Priority: 3, State: "MASTER", OwnState: "MASTER"}}, wantKnown: true},
		{name: "a tenant's SM beside the own master, ports without M_Key protection", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(other, 3, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{1: 4}, unprotected: 1,
			wantFound: &store.SecondSM{PortGUID: other, Priority: 3, State: "MASTER", OwnState: "MASTER"}, wantKnown: true},
		{name: "a tenant's SM while the own port names a silent master", m: pkeyread.Masters{MasterLID: 9, OwnLID: 1, Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(other, 3, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{1: 4},
			wantFound: &store.SecondSM{PortGUID: other, Priority: 3, State: "MASTER", OwnState: "MASTER"}, wantKnown: true},
		{name: "two masters behind host ports: the one over ports gates, the other is named", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(0x0002c90300a20001, 2, pkeyread.SMMaster), sm(other, 3, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{0xa1: 1},
			wantFound:   &store.SecondSM{PortGUID: other, Priority: 3, State: "MASTER", OwnState: "MASTER"},
			wantForeign: []store.SecondSM{{PortGUID: 0x0002c90300a20001, Priority: 2, State: "MASTER", OwnState: "MASTER"}}, wantKnown: true},
		{name: "own standby, the new master not yet named by the own port", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMStandby), Own: sm(own, 1, pkeyread.SMStandby)},
			sms:       []pkeyread.SMInfo{sm(other, 15, pkeyread.SMMaster)},
			wantFound: &store.SecondSM{PortGUID: other, Priority: 15, State: "MASTER", OwnState: "STANDBY"}, wantKnown: true},
		{name: "a tenant's SM discovering beside the own master, ports without M_Key protection", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(other, 0, pkeyread.SMDiscovering)}, masterLIDs: map[uint16]int{1: 4}, unprotected: 4,
			wantFound: &store.SecondSM{PortGUID: other, Priority: 0, State: "DISCOVERING", OwnState: "MASTER"}, wantKnown: true,
			wantText: []string{"port 0x0002c90300a10001 (priority 0, DISCOVERING) may become master", "without M_Key protection"}},
		{name: "a tenant's SM standby beside the own master, ports without M_Key protection", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(other, 0, pkeyread.SMStandby)}, masterLIDs: map[uint16]int{1: 4}, unprotected: 1,
			wantFound: &store.SecondSM{PortGUID: other, Priority: 0, State: "STANDBY", OwnState: "MASTER"}, wantKnown: true},
		{name: "a tenant's SM discovering while the own OpenSM restarts, ports without M_Key protection", m: pkeyread.Masters{OwnLID: 1, Own: sm(own, 1, pkeyread.SMDiscovering)},
			sms: []pkeyread.SMInfo{sm(other, 0, pkeyread.SMDiscovering)}, unprotected: 4,
			wantFound: &store.SecondSM{PortGUID: other, Priority: 0, State: "DISCOVERING", OwnState: "DISCOVERING"}, wantKnown: true},
		{name: "a master over ports gates before a discovering SM", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(0x0002c90300a20001, 0, pkeyread.SMDiscovering), sm(other, 3, pkeyread.SMMaster)}, masterLIDs: map[uint16]int{1: 4}, unprotected: 4,
			wantFound: &store.SecondSM{PortGUID: other, Priority: 3, State: "MASTER", OwnState: "MASTER"}, wantKnown: true},
		{name: "a not-active SM beside the own master, ports without M_Key protection, is not flagged", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(other, 0, pkeyread.SMNotActive)}, masterLIDs: map[uint16]int{1: 4}, unprotected: 4, wantKnown: true},
		{name: "a standby SM beside the own master is not flagged", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMMaster), Own: sm(own, 1, pkeyread.SMMaster)},
			sms: []pkeyread.SMInfo{sm(other, 0, pkeyread.SMStandby), sm(other+0x10000, 15, pkeyread.SMNotActive)}, wantKnown: true},
		{name: "own not active", m: pkeyread.Masters{MasterLID: 1, OwnLID: 1, Master: sm(own, 1, pkeyread.SMNotActive), Own: sm(own, 1, pkeyread.SMNotActive)},
			wantFound: &store.SecondSM{PortGUID: own, Priority: 1, State: "NOTACTIVE", OwnState: "NOTACTIVE"}, wantKnown: true,
			wantText: []string{"is NOTACTIVE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeMasters(smLook{masters: tc.m, sms: tc.sms, masterLIDs: tc.masterLIDs, unprotected: tc.unprotected}, own)
			found, known := v.found, v.known
			if known != tc.wantKnown || (found == nil) != (tc.wantFound == nil) || (found != nil && *found != *tc.wantFound) {
				t.Fatalf("judgeMasters = %+v, %v; want %+v, %v", found, known, tc.wantFound, tc.wantKnown)
			}
			if known && !slices.Equal(v.foreign, tc.wantForeign) {
				t.Fatalf("judgeMasters' foreign SMs = %+v; want %+v", v.foreign, tc.wantForeign)
			}
			if found == nil {
				return
			}
			text := secondSMReason(verdict.SecondSMEvidence{Master: found, Own: own})
			for _, want := range tc.wantText {
				if !strings.Contains(text, want) {
					t.Errorf("reason %q does not say %q", text, want)
				}
			}
		})
	}
}
