package neutronimport

import (
	"fmt"
	"io"
)

// Write prints the report for an operator: one line per network or port,
// by what happens to it, then a summary line; nothing when the import failed
// before it read Neutron.
func (r Report) Write(w io.Writer) error {
	if !r.read {
		return nil
	}
	recorded, removed := "recorded", "removed"
	if r.DryRun {
		recorded, removed = "would record", "would remove"
	}
	for _, group := range []struct {
		label    string
		findings []Finding
	}{
		{recorded, r.Recorded}, {"refused", r.Refused}, {"skipped", r.Skipped},
		{"not in Neutron", r.NotInNeutron}, {removed, r.Removed},
	} {
		for _, f := range group.findings {
			if _, err := fmt.Fprintf(w, "%s: %s\n", group.label, f); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "summary: Neutron has %d networks and %d ports with a client-id on the InfiniBand physnets "+
		"(%d other objects are not the manager's); %d in agreement, %d %s, %d refused, %d skipped, %d not in Neutron, %d %s\n",
		len(r.Neutron.Networks), len(r.Neutron.Ports)+r.portsSetAside(), r.Ignored, r.InSync,
		len(r.Recorded), recorded, len(r.Refused), len(r.Skipped), len(r.NotInNeutron), len(r.Removed), removed)
	return err
}

// portsSetAside counts the ports Neutron has that the inventory set aside
// (refused or skipped) for the summary's count of Neutron's ports.
func (r Report) portsSetAside() int {
	n := 0
	for _, f := range append(r.Neutron.Refused, r.Neutron.Skipped...) {
		if f.Kind == "port" {
			n++
		}
	}
	return n
}
