package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// acceptMovedGUIDs records, for each port GUID of list (comma separated),
// the switch port OpenSM's last sweep found it behind as its place: a move
// the operator checked (a host recabled, an HCA moved to another host), which
// opens the gate duplicate_guid it held. A recorded GUID not in the sweep is
// forgotten (its host gone for good: it is recorded again where it next
// appears); one neither recorded nor in the sweep is refused.
func acceptMovedGUIDs(ctx context.Context, cfg config.FabricConfig, st *store.Store, list string, w io.Writer) error {
	guids, err := parseGUIDList(list)
	if err != nil {
		return usageError{err.Error()}
	}
	dump := cfg.OpenSM.SubnetDump()
	topo, err := topology.Load(dump)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("OpenSM has not swept yet: %s does not exist", dump)
	}
	if err != nil {
		return fmt.Errorf("OpenSM's subnet dump: %w (if OpenSM was sweeping, try again)", err)
	}
	before, err := st.GUIDPlaces(ctx)
	if err != nil {
		return err
	}
	was := map[fabric.GUID]string{}
	for _, p := range before {
		was[p.GUID] = p.SwitchPort()
	}
	var places []store.GUIDPlace
	var gone []fabric.GUID
	for _, g := range guids {
		sw, port, ok := topo.HostPort(g)
		switch {
		case ok:
			places = append(places, store.GUIDPlace{GUID: g, Switch: sw, Port: port})
		case was[g] != "":
			gone = append(gone, g)
		default:
			return fmt.Errorf("port GUID %s is neither recorded nor behind a switch port in OpenSM's last sweep: "+
				"plug its host in, wait for the sweep, and try again", g)
		}
	}
	if err := st.AcceptGUIDPlaces(ctx, places); err != nil {
		return err
	}
	if _, err := st.ForgetGUIDPlaces(ctx, gone); err != nil {
		return err
	}
	for _, p := range places {
		from := was[p.GUID]
		if from == "" {
			from = "none recorded"
		}
		fmt.Fprintf(w, "port GUID %s: its switch port is %s (was %s)\n", p.GUID, p.SwitchPort(), from)
	}
	for _, g := range gone {
		fmt.Fprintf(w, "port GUID %s: not in OpenSM's last sweep; its switch port (%s) is forgotten, "+
			"and recorded again where it next appears\n", g, was[g])
	}
	return nil
}

// parseGUIDList reads "GUID[,GUID...]".
func parseGUIDList(list string) ([]fabric.GUID, error) {
	var guids []fabric.GUID
	for _, s := range strings.Split(list, ",") {
		g, err := fabric.ParseGUID(strings.TrimSpace(s))
		if err != nil || g == 0 {
			return nil, fmt.Errorf("--accept-moved-guid: %q is not a port GUID", s)
		}
		guids = append(guids, g)
	}
	return guids, nil
}
