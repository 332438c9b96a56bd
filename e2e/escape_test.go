package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// hostileName is a tenant's network name made for an operator's terminal:
// ESC[8m hides what follows, CR and LF start a line of the name's own that
// reads as --audit's verdict, U+202E turns the rest around, and CSI as a C1
// control (U+009B) starts a sequence on a terminal that reads 8-bit controls.
const hostileName = "ib-tenant-a\x1b[8m\u202e\u009b2J\r\nclean: every port holds what the recorded state says, and nothing else\n"

// forgedLine is the line hostileName would print on a line of its own.
const forgedLine = "clean: every port holds what the recorded state says, and nothing else"

// TestHostileNetworkNameReachesNoTerminal: a network named to hide the lines
// after it and forge --audit's "clean" line owns the partition an isolation
// breach is found in, so that its name is in the audit's findings. --audit,
// --status (text and JSON), the job networking-mlnx reads and the manager's
// log all carry it with its control characters escaped, and no line of
// theirs is the forged one.
func TestHostileNetworkNameReachesNoTerminal(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, "sqlite"), fabricsim.Options{Hosts: 3},
		settings{OpenSM: []string{"audit_interval = 0.2"}})
	m.confirmSwitches()
	h1, h2, h3 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID, m.fabric.Host("H3").PortGUID
	name, _ := json.Marshal(hostileName)
	body := strings.Replace(fixture(t, "network_create_vlan.json"), `"ib-tenant-a"`, string(name), 1)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", body), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", auditNet, vendorClientID(h1))), nil)
	m.waitCleanAudit(0)

	m.breachAt(h2)
	m.waitAuditLine("ERROR", "audit: port "+h2.String()+" holds pkey 0x0065", "isolation breach")
	job := m.accept("POST", "/cloudx/Port", portBody("port-h3", auditNet, vendorClientID(h3)))
	m.waitDescription(job, "the fabric audit found port "+h2.String()+" holds pkey 0x0065")
	_, served := m.send("GET", "/"+job, "")

	audit, _ := m.tryOperator("--audit")
	status, _ := m.tryOperator("--status")
	statusJSON, _ := m.tryOperator("--status", "--json")
	for what, out := range map[string]string{"--audit": audit, "--status": status, "--status --json": statusJSON,
		"the job as served": served, "the manager's log": m.log()} {
		// Escaped for a terminal (\x1b), that in JSON (\\x1b), or by JSON (\u001b).
		if !containsAny(out, `ib-tenant-a\x1b[8m`, `ib-tenant-a\\x1b[8m`, `ib-tenant-a\u001b[8m`) {
			t.Errorf("%s does not name the network with its ESC escaped:\n%s", what, out)
		}
		if r, ok := terminalControl(out); ok {
			t.Errorf("%s carries %U, which a terminal acts on:\n%q", what, r, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), forgedLine) {
				t.Errorf("%s prints the network's forged line %q", what, line)
			}
		}
	}
}

// terminalControl is the first character of out, besides its line feeds,
// that a terminal acts on or shows other than as itself.
func terminalControl(out string) (rune, bool) {
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			return r, true
		}
	}
	return 0, false
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
