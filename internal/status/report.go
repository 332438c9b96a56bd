package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// --status of several fabrics: each fabric's status is read and judged as
// one fabric's always was; the command's verdict is the worst of theirs, so
// that a script reading the exit status hears of any fabric's held jobs.

// Report is what --status --json prints: the status of the fabric shown
// first (the default fabric's without --fabric) at the top level, where
// scripts written before several fabrics read it, and every fabric shown in
// Fabrics.
type Report struct {
	Status
	Fabrics []FabricStatus `json:"fabrics"`
}

// FabricStatus is one fabric's status.
type FabricStatus struct {
	Name string `json:"name"`
	Status
}

// Run reads the status of each fabric from its view of the store (views[i]
// is fabrics[i]'s) and prints it; its verdict is the worst fabric's (none
// with asJSON, whose fields carry it). wrap names a fabric in the error of
// reading its status.
func Run(ctx context.Context, fabrics []Fabric, views []*store.Store, w io.Writer, asJSON bool,
	wrap func(Fabric, error) error) error {
	statuses := make([]FabricStatus, len(fabrics))
	for i, f := range fabrics {
		s, err := Read(ctx, f.Config, views[i])
		if err != nil {
			return wrap(f, err)
		}
		statuses[i] = FabricStatus{Name: f.Name, Status: s}
	}
	if asJSON {
		return WriteJSON(w, statuses)
	}
	// A configuration of the default fabric alone (its file has no other)
	// prints as it always did.
	if len(fabrics) == 1 && len(fabrics[0].Config.Fabrics) == 1 {
		if err := Print(w, statuses[0].Status); err != nil {
			return err
		}
		return Verdict(statuses[0].Status)
	}
	return PrintFabrics(w, fabrics, statuses)
}

// WriteJSON writes --status --json's object: the first fabric's status at
// the top level, every fabric's in fabrics; a tenant's names in it with the
// characters a terminal acts on escaped (escape.JSON).
func WriteJSON(w io.Writer, statuses []FabricStatus) error {
	enc := json.NewEncoder(escape.JSONWriter(w))
	enc.SetIndent("", "  ")
	return enc.Encode(Report{Status: statuses[0].Status, Fabrics: statuses})
}

// PrintFabrics writes a block per fabric, then which fabrics hold jobs, and
// returns the worst verdict.
func PrintFabrics(w io.Writer, fabrics []Fabric, statuses []FabricStatus) error {
	var worst error
	var held, unchecked []string
	for i, s := range statuses {
		if i > 0 {
			fmt.Fprintln(w)
		}
		escape.Fprintf(w, "fabric %s (%s):\n", s.Name, fabrics[i].Section)
		if err := Print(w, s.Status); err != nil {
			return err
		}
		v := Verdict(s.Status)
		switch verdictCode(v) {
		case ExitJobsHeld:
			held = append(held, s.Name)
		case ExitCannotTell:
			unchecked = append(unchecked, s.Name)
		}
		worst = worseVerdict(worst, v)
	}
	if len(statuses) > 1 {
		fmt.Fprintln(w)
		switch {
		case len(held) > 0:
			escape.Fprintf(w, "fabrics whose jobs do not complete: %s\n", strings.Join(held, ", "))
		case len(unchecked) > 0:
			escape.Fprintf(w, "fabrics with something not checked from this host: %s\n", strings.Join(unchecked, ", "))
		default:
			fmt.Fprintln(w, "every fabric's jobs complete")
		}
	}
	return worst
}

// worseVerdict is the worse of two --status verdicts: held jobs, then
// something that could not be checked, then nothing.
func worseVerdict(a, b error) error {
	rank := map[int]int{ExitJobsComplete: 0, ExitCannotTell: 1, ExitJobsHeld: 2}
	if rank[verdictCode(b)] > rank[verdictCode(a)] {
		return b
	}
	return a
}
