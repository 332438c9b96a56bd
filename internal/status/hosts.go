package status

import (
	"context"
	"fmt"
	"io"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/hostmap"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Hosts are the confirmed hosts (--confirm-hosts) as --status shows them,
// with where OpenSM's last sweep disagrees: a host named there is refused by
// the hosts API until an operator confirms again. They hold no job.
type Hosts struct {
	Names int `json:"names"` // confirmed host names
	Ports int `json:"ports"` // their ports
	// Mismatches are where the last sweep disagrees with them, by host;
	// empty when it agrees, or when it could not be read (Unchecked).
	Mismatches []HostMismatch `json:"mismatches"`
	// Unchecked says why the sweep could not be read; "" when it was.
	Unchecked string `json:"unchecked"`
}

// HostMismatch is one port where the last sweep and the confirmed hosts
// disagree (hostmap.Mismatch): "renamed", a confirmed port of Host now
// describing itself otherwise; "claimed", a port not confirmed as Host's
// naming itself after it.
type HostMismatch struct {
	Kind        string `json:"kind"`
	Host        string `json:"host"`
	GUID        string `json:"guid"`
	Description string `json:"description"`
	Confirmed   string `json:"confirmed"` // the description it was confirmed with; "" for claimed
	Text        string `json:"text"`
}

// readHosts reads the confirmed hosts into s and checks them against this
// host's subnet dump; nothing when no host is confirmed (Hosts stays nil).
func readHosts(ctx context.Context, cfg config.FabricConfig, st *store.Store, s *Status) error {
	confirmed, err := st.ConfirmedHosts(ctx)
	if err != nil || len(confirmed) == 0 {
		return err
	}
	m := hostmap.New(confirmed)
	h := &Hosts{Ports: len(confirmed), Mismatches: []HostMismatch{}}
	names := map[string]bool{}
	for _, c := range confirmed {
		names[c.Name] = true
	}
	h.Names = len(names)
	s.Hosts = h
	top, err := topology.Load(cfg.OpenSM.SubnetDump())
	if err != nil {
		h.Unchecked = fmt.Sprintf("OpenSM's last sweep cannot be read from this host: %v", err)
		return nil
	}
	for _, mm := range m.Mismatches(top.HostPortNames()) {
		h.Mismatches = append(h.Mismatches, HostMismatch{Kind: string(mm.Kind), Host: mm.Host, GUID: mm.GUID.String(),
			Description: mm.Description, Confirmed: mm.Confirmed, Text: mm.String()})
	}
	return nil
}

// printHosts writes the confirmed hosts' lines of --status: none when no
// host is confirmed.
func printHosts(w io.Writer, h *Hosts) {
	switch {
	case h == nil:
		return
	case h.Unchecked != "":
		escape.Fprintf(w, "confirmed hosts:\t%d hosts, %d ports; not checked: %s\n", h.Names, h.Ports, h.Unchecked)
	case len(h.Mismatches) == 0:
		escape.Fprintf(w, "confirmed hosts:\t%d hosts, %d ports; OpenSM's last sweep agrees\n", h.Names, h.Ports)
	default:
		escape.Fprintf(w, "confirmed hosts:\t%d hosts, %d ports; OpenSM's last sweep disagrees on %d ports\n",
			h.Names, h.Ports, len(h.Mismatches))
	}
	for _, mm := range h.Mismatches {
		escape.Fprintf(w, "host mismatch:\t%s; the hosts API refuses %s until it is checked and --confirm-hosts run again\n",
			mm.Text, mm.Host)
	}
}
