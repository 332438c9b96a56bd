package partitions

import (
	"context"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Static is what a template writes besides the networks' and the flat
// partition: the default partition and any static partition, as they are
// whatever the recorded state. The API asks it which pkeys a host port carries
// besides its network's, to keep the port below its switch port's pkey table
// capacity.
type Static struct {
	statements []Statement
	names      map[fabric.PKey]string
}

// Static renders the template for a fabric without networks or ports, and
// keeps what it writes besides the networks' and the flat partition: the
// static partitions, whose pkeys no network may take, named in its names. It
// does not judge the file (Check does, at each apply), so it accepts ALL_VCAS
// and a shared default partition.
func (t *Template) Static(ctx context.Context, defaultPartition string, flatPKey fabric.PKey) (*Static, error) {
	s := State{
		DefaultPartition: defaultPartition,
		Flat:             FlatPartition{PKey: flatPKey},
		// Lenient: this only reads the file; Check judges it at every apply.
		Rules: Rules{SharedDefaultPartition: true, Flavour: fabric.NVIDIA},
	}
	text, err := t.Render(ctx, s)
	if err != nil {
		return nil, err
	}
	f, err := ParseFor(text, fabric.NVIDIA)
	if err != nil {
		return nil, fmt.Errorf("partitions template %s renders, without networks, to a file that does not parse: %w", t.name, err)
	}
	st := &Static{names: map[fabric.PKey]string{}}
	for _, statement := range f.Statements {
		if statement.PKey == flatPKey {
			continue
		}
		st.statements = append(st.statements, statement)
		if statement.PKey != fabric.DefaultPKey {
			st.names[statement.PKey] = statement.Name
		}
	}
	return st, nil
}

// Name says whether pkey is a static partition's (not the default's), and its name.
func (s *Static) Name(pkey fabric.PKey) (string, bool) {
	name, ok := s.names[pkey]
	return name, ok
}

// PKeysOf returns the pkeys of the default and static partitions that host
// port guid is a member of, full or limited: those listing it, ALL, ALL_CAS or
// ALL_VCAS (a virtual port is a host port too). SELF, ALL_SWITCHES and
// ALL_ROUTERS name no host port.
func (s *Static) PKeysOf(guid fabric.GUID) []fabric.PKey {
	var out []fabric.PKey
	for _, st := range s.statements {
		for _, m := range st.Members {
			if m.Keyword == All || m.Keyword == AllCAs || m.Keyword == AllVCAs || (m.Keyword == "" && m.GUID == guid) {
				out = append(out, st.PKey)
				break
			}
		}
	}
	return out
}

// Listing returns the name of the first default or static partition that lists
// host port guid by its GUID, whatever the membership: a port of a network may
// be in no other partition (see Check), so such a port cannot join a network.
func (s *Static) Listing(guid fabric.GUID) (name string, listed bool) {
	for _, st := range s.statements {
		for _, m := range st.Members {
			if m.Keyword == "" && m.GUID == guid {
				return st.Name, true
			}
		}
	}
	return "", false
}
