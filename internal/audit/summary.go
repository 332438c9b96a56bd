package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Summary is one audit's result: what was read, what was found, and a line
// per partition, for --audit, --status and the gates.
type Summary struct {
	Revision int64         `json:"revision"` // of the file the tables were held against
	Started  time.Time     `json:"started"`
	Took     time.Duration `json:"took_ns"`
	Ports    int           `json:"ports"` // host ports audited
	Read     int           `json:"read"`  // of which read
	// EnforcementChecked is false where the fabric does not report the
	// switch ports' enforcement bits (see Input.CheckEnforcement).
	EnforcementChecked bool               `json:"enforcement_checked"`
	Findings           []Finding          `json:"findings"`
	Partitions         []PartitionSummary `json:"partitions"`
}

// PartitionSummary is one partition's line: its members and its findings.
type PartitionSummary struct {
	PKey     uint16       `json:"pkey"`
	Owner    string       `json:"owner"`
	Members  int          `json:"members"` // host ports recorded in it (full or limited)
	Findings map[Kind]int `json:"findings,omitempty"`
}

// Counts are the findings by kind.
func (s Summary) Counts() map[Kind]int {
	counts := map[Kind]int{}
	for _, f := range s.Findings {
		counts[f.Kind]++
	}
	return counts
}

// Breaches are the findings that keep jobs from completing (Finding.Breach).
func (s Summary) Breaches() []Finding {
	var out []Finding
	for _, f := range s.Findings {
		if f.Breach() {
			out = append(out, f)
		}
	}
	return out
}

// HeldPorts are the host ports of the HostOnly findings, each with the
// first such finding's text: their jobs are held, the fabric's are not.
func (s Summary) HeldPorts() map[fabric.GUID]string {
	held := map[fabric.GUID]string{}
	for _, f := range s.Findings {
		if _, seen := held[f.Port]; f.HostOnly && !seen {
			held[f.Port] = f.Text
		}
	}
	return held
}

// Heals says whether applying the state again would repair a finding.
func (s Summary) Heals() bool {
	for _, f := range s.Findings {
		if f.Heals() {
			return true
		}
	}
	return false
}

// Clean says whether the audit found nothing at all.
func (s Summary) Clean() bool { return len(s.Findings) == 0 }

// summarize builds the per-partition lines of e for the ports audited.
func summarize(e Expected, ports []fabric.GUID, findings []Finding) []PartitionSummary {
	lines := make([]PartitionSummary, len(e.Partitions))
	index := map[uint16]int{}
	for i, p := range e.Partitions {
		lines[i] = PartitionSummary{PKey: p.PKey, Owner: p.Owner}
		index[p.PKey] = i
		for _, port := range ports {
			if p.Membership(port, e.SMPort) != 0 {
				lines[i].Members++
			}
		}
	}
	for _, f := range findings {
		i, ok := index[f.PKey]
		if !ok || f.PKey == 0 {
			continue // no partition's: unknown pkeys, enforcement, unreachable ports
		}
		if lines[i].Findings == nil {
			lines[i].Findings = map[Kind]int{}
		}
		lines[i].Findings[f.Kind]++
	}
	return lines
}

// CountsText says counts by kind, in Kinds' order ("2 foreign_pkey, 1
// unreachable"); "none" when empty: --audit's and --status's wording.
func CountsText(counts map[Kind]int) string {
	var parts []string
	for _, k := range Kinds {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
