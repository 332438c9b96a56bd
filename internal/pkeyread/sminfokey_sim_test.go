package pkeyread_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// What OpenSM tells a host posing as a subnet manager: these tests document
// OpenSM's behaviour (the manager's threat model rests on it), they test no
// code of the manager's but the SMP helper they send with.

// tenantSMKey is the SM_Key of the tests' OpenSM: a secret, as the
// manager's hardening makes it.
const tenantSMKey = 0x5ec2e7a11c0ffee5

// tenantConn attaches to the simulator at host H1, as a bare-metal tenant
// with its HCA's umad device would, and returns the connection and the
// SM's LID.
func tenantConn(t *testing.T, f *fabricsim.Fabric) (pkeyread.Conn, uint16) {
	t.Helper()
	d, ok := pkeyread.SimDialerFromEnv(f.Env())
	if !ok {
		t.Fatal("no simulator")
	}
	d.Node = "H1"
	return dialSMPort(t, d, f)
}

// sendSMInfo sends r from the tenant's connection within a second.
func sendSMInfo(t *testing.T, conn pkeyread.Conn, lid uint16, r pkeyread.SMInfoRequest) (pkeyread.SMInfo, uint64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	return pkeyread.SendSMInfo(ctx, conn, &testTID, lid, r)
}

// TestOpenSMDisclosesSMKeyToAClaimedMaster: a SubnGet(SMInfo) from a host
// port is answered with OpenSM's real SM_Key, whatever state the Get's
// payload claims (MASTER, as a peer SM would, or none). OpenSM withholds it
// only when its own port carries an M_Key with ProtectBits 1 (the key then
// reads 0) or 2 and more (the Get is dropped, ERR 2F1A) and the Get does not
// carry that M_Key; the simulator reports ProtectBits 0 for every port, so
// even the manager's M_Key at level 2 shows the key here.
func TestOpenSMDisclosesSMKeyToAClaimedMaster(t *testing.T) {
	for _, conf := range []struct{ name, lines string }{
		{"no M_Key", ""},
		{"M_Key at level 2 (not enforced by the simulator)", "m_key 0x1122334455667788\nm_key_protection_level 2\n"},
	} {
		t.Run(conf.name, func(t *testing.T) {
			f := fabricsim.StartT(t, fabricsim.Options{Hosts: 2})
			_, _, log := startSMWith(t, f, 1, 1, tenantSMKey, conf.lines)
			waitFor(t, "OpenSM's SUBNET UP", logSays(log, "SUBNET UP"))
			conn, lid := tenantConn(t, f)
			defer conn.Close()
			for _, claim := range []pkeyread.SMState{pkeyread.SMMaster, pkeyread.SMStandby, pkeyread.SMNotActive} {
				sm, key, err := sendSMInfo(t, conn, lid, pkeyread.SMInfoRequest{
					Sender: pkeyread.SMInfo{GUID: fabricsim.HostGUID(1), Priority: 15, State: claim}})
				if err != nil || sm.GUID != fabricsim.SMGUID || sm.State != pkeyread.SMMaster {
					t.Fatalf("Get claiming %s: %+v, %v; want OpenSM's SMInfo, MASTER", claim, sm, err)
				}
				if key != tenantSMKey {
					t.Errorf("Get claiming %s: SM_Key %#x, not OpenSM's %#x: OpenSM no longer discloses it, and "+
						"docs/security.md's finding 13 is to be updated", claim, key, uint64(tenantSMKey))
				}
			}
		})
	}
}

// TestOpenSMMasterRefusesStateSets: with the SM_Key, a host's SubnSet(SMInfo)
// claiming MASTER does not depose a master OpenSM by itself: DISABLE and
// STANDBY are refused (status 7; OpenSM logs ERR 3207 and ERR 2F07, the
// signal invalid in state MASTER); HANDOVER is answered and the master
// sweeps once more and stays MASTER. What deposes it is an SM of its own key
// and a higher priority, to which it hands the subnet over (the e2e tests).
func TestOpenSMMasterRefusesStateSets(t *testing.T) {
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: 2})
	_, _, log := startSM(t, f, 1, 1, tenantSMKey)
	waitFor(t, "OpenSM's SUBNET UP", logSays(log, "SUBNET UP"))
	conn, lid := tenantConn(t, f)
	defer conn.Close()
	for _, c := range []struct {
		name     string
		modifier uint32
		refused  bool
	}{
		{"DISABLE", pkeyread.SMInfoDisable, true},
		{"STANDBY", pkeyread.SMInfoStandby, true},
		{"HANDOVER", pkeyread.SMInfoHandover, false},
	} {
		_, _, err := sendSMInfo(t, conn, lid, pkeyread.SMInfoRequest{Set: true, Modifier: c.modifier, SMKey: tenantSMKey,
			Sender: pkeyread.SMInfo{GUID: fabricsim.HostGUID(1), Priority: 15, State: pkeyread.SMMaster}})
		if c.refused {
			if err == nil || !errors.Is(err, pkeyread.ErrMADStatus) {
				t.Errorf("Set %s: %v; want status 7", c.name, err)
			}
			waitFor(t, "OpenSM's refusal of "+c.name,
				logSays(log, fmt.Sprintf("Invalid signal OSM_SM_SIGNAL_%s in state MASTER", c.name)))
		} else if err != nil {
			t.Errorf("Set %s: %v; want an answer", c.name, err)
		}
		sm, _, err := sendSMInfo(t, conn, lid, pkeyread.SMInfoRequest{})
		if err != nil || sm.State != pkeyread.SMMaster {
			t.Errorf("after Set %s: %+v, %v; want OpenSM still MASTER", c.name, sm, err)
		}
	}
}
