package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
)

// tenantName is a network's name made for an operator's terminal: ESC[8m
// hides what follows, CR and LF forge a line, U+202E turns text around,
// U+009B is CSI to a terminal that reads 8-bit controls.
const tenantName = "net\x1b[8m\u202e\u009b\x7f\r\nclean: every port holds what the recorded state says, and nothing else"

// controlIn is the first character of out, besides its line feeds, that a
// terminal acts on or shows other than as itself.
func controlIn(out string) (rune, bool) {
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			return r, true
		}
	}
	return 0, false
}

// Both log formats write a record on its one line, and no character of a
// tenant's name that a terminal acts on, in the message or in a value.
func TestLogEscapesTenantText(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var out strings.Builder
			log := newLoggerTo(&out, format, slog.LevelInfo)
			log.Error("audit: port 0x1 holds pkey 0x0065 (network "+tenantName+")", "owner", tenantName,
				"error", errors.New(tenantName), slog.Group("request", "path", "/x/"+tenantName))
			if r, ok := controlIn(out.String()); ok {
				t.Errorf("the %s log carries %U:\n%q", format, r, out.String())
			}
			if n := strings.Count(out.String(), "\n"); n != 1 {
				t.Errorf("the %s log wrote %d lines for one record:\n%s", format, n, out.String())
			}
		})
	}
}

// --audit prints a network's name, in its table and its findings, escaped on
// the line it belongs to: no line of its own, no control character.
func TestAuditPrintEscapesNames(t *testing.T) {
	owner := "network " + tenantName + " (n1)"
	s := audit.Summary{
		Partitions: []audit.PartitionSummary{{PKey: 0x65, Owner: owner, Members: 1,
			Findings: map[audit.Kind]int{audit.ForeignPKey: 1}}},
		Findings: []audit.Finding{{Kind: audit.ForeignPKey, Port: 0x201, PKey: 0x65, Owner: owner,
			Text: "port 0x0002c90300000201 holds pkey 0x0065 (" + owner + ") as a full member: isolation breach"}},
	}
	var out strings.Builder
	if err := printAudit(&out, s); err != nil {
		t.Fatal(err)
	}
	if r, ok := controlIn(out.String()); ok {
		t.Errorf("--audit carries %U:\n%q", r, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "clean:") {
			t.Errorf("--audit printed the name's forged line %q:\n%s", line, out.String())
		}
	}
	if !strings.Contains(out.String(), `net\x1b[8m\u202e\u009b\x7f\r\nclean`) {
		t.Errorf("--audit does not name the network, escaped:\n%s", out.String())
	}
}
