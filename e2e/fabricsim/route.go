package fabricsim

import (
	"context"
	"fmt"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// PKeysByRoute reads a port's P_Key table as smpquery does by directed route
// ("0,1,8,8,1": the SM's HCA port, then each switch's out port): no LID and
// no forwarding table, so it reaches ports beyond the 16 switches the
// simulator forwards a LID-routed SMP across. It checks first that the route
// leads to port (its NodeInfo's PortGuid).
func (f *Fabric) PKeysByRoute(ctx context.Context, port fabric.GUID, route string) ([]uint16, error) {
	out, err := f.Run(ctx, "smpquery", "-D", "nodeinfo", route)
	if err != nil {
		return nil, err
	}
	var at fabric.GUID
	for line := range strings.Lines(string(out)) {
		if name, value, ok := strings.Cut(line, ":"); ok && name == "PortGuid" {
			at, err = fabric.ParseGUID(strings.Trim(strings.TrimSpace(value), "."))
			if err != nil {
				return nil, fmt.Errorf("smpquery -D nodeinfo %s: PortGuid %q: %w", route, value, err)
			}
		}
	}
	if at != port {
		return nil, fmt.Errorf("directed route %s leads to port %s, not %s", route, at, port)
	}
	out, err = f.Run(ctx, "smpquery", "-D", "pkeys", route)
	if err != nil {
		return nil, err
	}
	return parsePKeyTable(out)
}
