package topology

import (
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// HostName is the host name a node description gives: its first word (a
// host's description is "<host name> <device>" by convention, as UFM's
// system_name reads it). It says what the host claims, never who it is: the
// description is set by whoever runs the host.
func HostName(description string) string {
	name, _, _ := strings.Cut(description, " ")
	return name
}

// NamedPort is a host port of the dump with the node description that names
// its host.
type NamedPort struct {
	GUID        fabric.GUID
	Name        string // HostName(Description)
	Description string
}

// HostPortNames returns every host (CA) port of the dump with the name its
// node description gives it, by GUID.
func (t *Topology) HostPortNames() []NamedPort {
	var out []NamedPort
	for _, p := range t.Ports() {
		if p.Host {
			out = append(out, NamedPort{GUID: p.GUID, Name: HostName(p.Description), Description: p.Description})
		}
	}
	return out
}
