package partitions

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Adopted partitions. A fabric that UFM or another manager ran has tenant
// partitions; a manager that starts from an empty database would render only
// its own and cut every tenant off. --adopt-partitions records the running
// file's partitions that the manager does not own by configuration; each is
// rendered as the running file wrote it while no owner has its pkey, and once
// a network, the flat partition or a Kubernetes pkey owns it, its members are
// written in the owner's statement beside the owner's own, with their
// memberships, until they are released (the owner's flags and name replace
// the adopted ones). State.Adopted holds them.

// AdoptionPlan is what a running file's statements become: the partitions to
// adopt, and a note for each statement the manager does not adopt (the
// default partition, a static partition the template already writes, a
// partition without members).
type AdoptionPlan struct {
	Adopt []Statement
	Notes []string
}

// PlanAdoption sorts the statements of a running file (parsed with ParseFor)
// into those to adopt and those the manager owns by configuration: the
// default partition (the manager writes [opensm] default_partition instead)
// and the template's static partitions. A statement that cannot be adopted is
// refused, with every reason in one *Error, and then nothing is: a static
// partition's pkey or name with other contents, a keyword member (an owner
// taking the pkey over could not keep it: make it a static partition), indx0,
// or a name the manager gives its own partitions for another pkey. The flat
// partition's pkey is adopted, and owned at once by the flat partition.
func PlanAdoption(f *File, flatPKey fabric.PKey, static *Static) (AdoptionPlan, error) {
	var plan AdoptionPlan
	var found problems
	staticNames := map[string]fabric.PKey{}
	for pkey, name := range static.names {
		staticNames[name] = pkey
	}
	for _, st := range f.Statements {
		what := fmt.Sprintf("partition %s (%s)", st.Name, st.PKey)
		if st.PKey == fabric.DefaultPKey {
			plan.Notes = append(plan.Notes, what+": not adopted, the manager writes [opensm] default_partition instead")
			continue
		}
		if name, ok := static.Name(st.PKey); ok {
			if static.sameAs(st) {
				plan.Notes = append(plan.Notes, fmt.Sprintf("%s: not adopted, the template writes it as static partition %s", what, name))
			} else {
				found.problem(st.Line, "%s: the template's static partition %s has this pkey with other contents: make them one", what, name)
			}
			continue
		}
		if pkey, ok := staticNames[st.Name]; ok {
			found.problem(st.Line, "%s: the template's static partition %s has this name", what, pkey)
			continue
		}
		if reason := unadoptable(st, flatPKey); reason != "" {
			found.problem(st.Line, "%s: %s", what, reason)
			continue
		}
		if len(st.Members) == 0 {
			plan.Notes = append(plan.Notes, what+": not adopted, it has no members")
			continue
		}
		st = Adoptable(st)
		plan.Adopt = append(plan.Adopt, st) // its line is the store's, which knows what is recorded
	}
	if err := found.err(); err != nil {
		return AdoptionPlan{}, err
	}
	return plan, nil
}

// unadoptable says why st cannot be adopted, or "".
func unadoptable(st Statement, flatPKey fabric.PKey) string {
	for _, m := range st.Members {
		if m.Keyword != "" {
			return fmt.Sprintf("member %s=%s cannot be adopted (a network or Kubernetes pkey taking the pkey over could not keep it): "+
				"write the partition in the template as a static one", m.Keyword, m.Membership)
		}
	}
	if hasFlag(st.Flags, "indx0") {
		return "indx0 cannot be adopted: only a Kubernetes partition whose members all asked for index 0 takes it"
	}
	switch {
	case st.Name == FlatPartitionName && st.PKey != flatPKey:
		return fmt.Sprintf("the name %s is the flat partition's, whose pkey is %s", FlatPartitionName, flatPKey)
	case strings.HasPrefix(st.Name, "k8s-") && st.Name != KubernetesPartitionName(st.PKey),
		strings.HasPrefix(st.Name, "net-") && !strings.HasPrefix(st.Name, PartitionName("", st.PKey)):
		return "the name is one the manager gives another pkey's partition"
	}
	return ""
}

// Adoptable is st as an adopted partition keeps it: line numbers dropped.
func Adoptable(st Statement) Statement {
	st.Line = 0
	st.Members = slices.Clone(st.Members)
	for i := range st.Members {
		st.Members[i].Line = 0
	}
	st.MGroups = slices.Clone(st.MGroups)
	for i := range st.MGroups {
		st.MGroups[i].Line = 0
	}
	return st
}

// Text is the statement as the manager writes it, the form an adopted
// partition is recorded in (Format's layout, without the final newline).
func (s Statement) Text() string {
	return strings.TrimSuffix(string(s.appendText(nil)), "\n")
}

// ParseStatement reads back one statement written by Text.
func ParseStatement(text string) (Statement, error) {
	f, err := ParseFor([]byte(text), fabric.NVIDIA)
	if err != nil {
		return Statement{}, err
	}
	if len(f.Statements) != 1 {
		return Statement{}, fmt.Errorf("want one partition statement, found %d", len(f.Statements))
	}
	return Adoptable(f.Statements[0]), nil
}

// sameAs says whether st writes what the static partition of its pkey writes.
func (s *Static) sameAs(st Statement) bool {
	for _, mine := range s.statements {
		if mine.PKey == st.PKey {
			a, b := Adoptable(mine), Adoptable(st)
			return bytes.Equal(a.appendText(nil), b.appendText(nil))
		}
	}
	return false
}

// adoptedText is the members_text of the adopted members of an owned
// partition (those the owner does not list itself), each with its membership.
func adoptedText(adopted *Statement, owners map[fabric.GUID]bool) string {
	if adopted == nil {
		return ""
	}
	var b []byte
	for _, m := range adopted.Members {
		if m.Keyword != "" || owners[m.GUID] {
			continue
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = appendGUID(b, m.GUID)
		b = append(b, '=')
		b = append(b, m.Membership...)
	}
	return string(b)
}

// joinMembersText joins two members_text with the comma between them.
func joinMembersText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// adoptedByPKey indexes s.Adopted.
func adoptedByPKey(s State) map[fabric.PKey]*Statement {
	out := make(map[fabric.PKey]*Statement, len(s.Adopted))
	for i := range s.Adopted {
		out[s.Adopted[i].PKey] = &s.Adopted[i]
	}
	return out
}

// ownedPKeys are the pkeys an owner has in s: the networks', the flat
// partition's and the Kubernetes partitions'.
func ownedPKeys(s State) map[fabric.PKey]bool {
	out := map[fabric.PKey]bool{s.Flat.PKey: true}
	for _, n := range s.Networks {
		out[n.PKey] = true
	}
	for _, k := range s.Kubernetes {
		out[k.PKey] = true
	}
	return out
}

// guidSet is a set of the GUIDs given.
func guidSet(gs []fabric.GUID) map[fabric.GUID]bool {
	out := make(map[fabric.GUID]bool, len(gs))
	for _, g := range gs {
		out[g] = true
	}
	return out
}

// adoptedVariables are the adopted partitions no owner has, as a template
// sees them, in pkey order: name, pkey and text (the whole statement as the
// running file wrote it, in the manager's layout).
func adoptedVariables(s State) []any {
	if len(s.Adopted) == 0 {
		return nil // the common case, once a switch-over is done: no map of every pkey
	}
	owned := ownedPKeys(s)
	var out []any
	parts := slices.Clone(s.Adopted)
	slices.SortFunc(parts, func(a, b Statement) int { return int(a.PKey) - int(b.PKey) })
	for i := range parts {
		if owned[parts[i].PKey] {
			continue
		}
		out = append(out, map[string]any{
			"name": parts[i].Name,
			"pkey": parts[i].PKey.String(),
			"text": parts[i].Text(),
		})
	}
	return out
}

// checkAdopted checks that st keeps every adopted member of its pkey, with
// its membership: whatever the template, an adopted member is never cut off.
func (c *checker) checkAdopted(st *Statement) {
	a, ok := c.adopted[st.PKey]
	if !ok {
		return
	}
	c.adoptedSeen[st.PKey] = struct{}{}
	in := make(map[fabric.GUID]Membership, len(st.Members))
	for _, m := range st.Members {
		if m.Keyword == "" {
			in[m.GUID] = m.Membership
		}
	}
	for _, m := range a.Members {
		switch got, listed := in[m.GUID]; {
		case m.Keyword != "":
		case c.ownerOfGUID[m.GUID] != nil && c.ownerOfGUID[m.GUID].pkey == st.PKey:
			// A port of the owner now: the owner says how it belongs.
		case !listed:
			c.problem(st.Line, "adopted port %s of pkey %s is missing from partition %s", m.GUID, st.PKey, st.Name)
		case got != m.Membership:
			c.problem(st.Line, "adopted port %s must be a %s member of partition %s, not %s", m.GUID, m.Membership, st.Name, got)
		}
	}
}

// isAdoptedMember says whether g is an adopted member of pkey.
func (c *checker) isAdoptedMember(pkey fabric.PKey, g fabric.GUID) bool {
	a, ok := c.adopted[pkey]
	if !ok {
		return false
	}
	return slices.ContainsFunc(a.Members, func(m Member) bool { return m.Keyword == "" && m.GUID == g })
}

// FlagsChange says how the header flags after differ from before, as
// "mtu=4 dropped, sl=3 added" (a flag whose value changes is one dropped
// and one added), or "" when after has the same flags: what an operator
// reads when an adoption or an owner's take-over changes a partition.
func FlagsChange(before, after []Flag) string {
	text := func(f Flag) string {
		if f.Value == "" {
			return f.Name
		}
		return f.Name + "=" + f.Value
	}
	var parts []string
	for _, f := range before {
		if !slices.Contains(after, f) {
			parts = append(parts, text(f)+" dropped")
		}
	}
	for _, f := range after {
		if !slices.Contains(before, f) {
			parts = append(parts, text(f)+" added")
		}
	}
	return strings.Join(parts, ", ")
}

// FlagsReplaced is an adopted partition whose owner's partition, as the
// file writes it, has other header flags: the tenant's partition now has
// the owner's (an adopted mtu=4 dropped, say).
type FlagsReplaced struct {
	PKey    fabric.PKey
	Adopted string // the adopted partition's name
	Owner   string // the name the file writes the partition under
	Change  string // FlagsChange of the adopted flags to the file's
}

// OwnedFlagChanges lists, for each adopted partition of s whose pkey an
// owner has (a network, a Kubernetes pkey or the flat partition), how the
// flags text, the file rendered from s, writes for the pkey differ from the
// adopted statement's; none when they are the same.
func OwnedFlagChanges(text []byte, s State) ([]FlagsReplaced, error) {
	owned := map[fabric.PKey]bool{s.Flat.PKey: true}
	for _, n := range s.Networks {
		owned[n.PKey] = true
	}
	for _, k := range s.Kubernetes {
		owned[k.PKey] = true
	}
	var adopted []Statement
	for _, a := range s.Adopted {
		if owned[a.PKey] {
			adopted = append(adopted, a)
		}
	}
	if len(adopted) == 0 {
		return nil, nil
	}
	f, err := ParseFor(text, fabric.NVIDIA)
	if err != nil {
		return nil, err
	}
	var out []FlagsReplaced
	for _, a := range adopted {
		for _, st := range f.Statements {
			if st.PKey != a.PKey {
				continue
			}
			if c := FlagsChange(a.Flags, st.Flags); c != "" {
				out = append(out, FlagsReplaced{PKey: a.PKey, Adopted: a.Name, Owner: st.Name, Change: c})
			}
		}
	}
	return out, nil
}

// HeaderFlags renders s with t and returns the header flags of pkey's
// statement in the file: what an owner's partition is written with, which
// the template decides. ok is false when the file has no such statement.
func (t *Template) HeaderFlags(ctx context.Context, s State, pkey fabric.PKey) (flags []Flag, ok bool, err error) {
	text, err := t.Render(ctx, s)
	if err != nil {
		return nil, false, err
	}
	f, err := ParseFor(text, fabric.NVIDIA)
	if err != nil {
		return nil, false, err
	}
	for _, st := range f.Statements {
		if st.PKey == pkey {
			return st.Flags, true, nil
		}
	}
	return nil, false, nil
}
