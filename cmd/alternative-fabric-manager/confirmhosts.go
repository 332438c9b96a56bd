package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// confirmHosts records the hosts of OpenSM's last sweep, each host port's
// GUID with the host name its node description gives, as the fabric's
// confirmed hosts, replacing the previous set: UFM's hosts API resolves host
// names through them alone. It prints what it recorded, for the operator to
// check that no host already claims another's name, and the ports it left
// out: a description whose first word no hostlist can name.
func confirmHosts(ctx context.Context, cfg config.FabricConfig, st *store.Store, w io.Writer) error {
	topo, err := lastSweep(cfg)
	if err != nil {
		return err
	}
	var hosts []store.ConfirmedHost
	var left []topology.NamedPort
	for _, p := range topo.HostPortNames() {
		if store.CheckHostName(p.Name) != nil {
			left = append(left, p)
			continue
		}
		hosts = append(hosts, store.ConfirmedHost{GUID: p.GUID, Name: p.Name, Description: p.Description})
	}
	if err := st.ConfirmHosts(ctx, hosts); err != nil {
		return err
	}
	printConfirmedHosts(w, hosts, left)
	return nil
}

// printConfirmedHosts lists the recorded ports by host name, then the ports
// left out. Descriptions are quoted: a tenant writes them.
func printConfirmedHosts(w io.Writer, hosts []store.ConfirmedHost, left []topology.NamedPort) {
	byName := map[string][]store.ConfirmedHost{}
	for _, h := range hosts {
		byName[h.Name] = append(byName[h.Name], h)
	}
	fmt.Fprintf(w, "confirmed %d ports of %d hosts as the fabric's hosts (the hosts API names them so):\n", len(hosts), len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		for _, h := range byName[name] {
			fmt.Fprintf(w, "  %s  %s  %s\n", name, h.GUID, strconv.Quote(h.Description))
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "not recorded: %d ports whose description names no host (want letters, digits, '-', '_' or '.' "+
			"before the first space):\n", len(left))
		for _, p := range left {
			fmt.Fprintf(w, "  %s  %s\n", p.GUID, strconv.Quote(p.Description))
		}
	}
}
