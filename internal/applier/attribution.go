package applier

import (
	"context"
	"fmt"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Failures stay local: a sweep that applied the file but logged pkey errors
// naming host ports fails only the jobs whose recorded places
// (store.OpenJob.Places, readback.go) are on those ports.
//
// A line that names a host port and a pkey (ERR 0512, one host's table full,
// and the other ERR 05xx of the pkey manager that say which pkey they could
// not set) fails the jobs with a place on that port in that pkey: a host
// whose table is full for one pkey fails the changes to that pkey, again at
// every sweep while it lasts, and not the changes to the other pkeys it
// holds. A line that names a port but no pkey (ERR 0502, 0506, 0509, 0511: a
// table block, the enforcement bits or an allocation failed) leaves the
// port's whole table in doubt: it fails the jobs with a place on that port,
// in any pkey. A line naming a switch port facing a host port is the host
// port's.
//
// Every other job of the sweep is then judged as after a clean sweep
// (settlePKeyErrors): by its own places' tables with verify = tables, so
// that it is neither failed for another port's error nor completed unread;
// by the log with verify = log. A tenant that resets its own host's HCA
// fails its own changes, never another tenant's.
//
// A line that names no port, or a port the subnet dump does not know, says
// nothing of which job it concerns: with verify = tables every job is judged
// by its tables; with verify = log every job of the sweep fails, as it did
// before attribution existed.

// place is a host port and a pkey of its table.
type place struct {
	port fabric.GUID
	pkey fabric.PKey
}

// anyPKey is the pkey of a place a line names without a pkey: the whole
// port's table.
const anyPKey fabric.PKey = 0

func (p place) String() string {
	if p.pkey == anyPKey {
		return fmt.Sprintf("host port %s", p.port)
	}
	return fmt.Sprintf("host port %s, pkey %s", p.port, p.pkey)
}

// attribution is what the pkey error lines of a sweep name: the lines by the
// place they could not program.
type attribution map[place][]string

// attribute places every line on a host port and a pkey, using OpenSM's
// subnet dump to turn the node GUID and port number it names into the port's
// GUID. ok is false when a line cannot be placed.
func (t *term) attribute(lines []string) (a attribution, ok bool) {
	topo, err := t.subnetDump().Load()
	if err != nil {
		t.Log.Warn("pkey errors cannot be attributed to ports: the subnet dump cannot be read", "error", err)
		return nil, false
	}
	a = attribution{}
	for _, l := range lines {
		p, res := placeLine(topo, l)
		switch res {
		case lineNoPort:
			t.Log.Warn("a pkey error names no port: it cannot be held against any one job", "line", l)
			return nil, false
		case lineUnknownPort:
			node, port, _ := opensm.PKeyErrorPlace(l)
			t.Log.Warn("a pkey error names a port the subnet dump does not know: it cannot be held against any one job",
				"line", l, "node", fabric.GUID(node), "port", port)
			return nil, false
		case linePlaced:
			a[p] = append(a[p], l)
		}
	}
	return a, true
}

// lineResult says what placeLine made of a pkey error line.
type lineResult int

const (
	linePlaced      lineResult = iota // on a host port
	lineNoChange                      // on a switch port that carries no change's pkeys
	lineNoPort                        // the line names no port
	lineUnknownPort                   // the line names a port the subnet dump does not know
)

// placeLine places pkey error line l on a host port and a pkey, as topo
// says.
func placeLine(topo *topology.Topology, l string) (place, lineResult) {
	node, port, found := opensm.PKeyErrorPlace(l)
	if !found {
		return place{}, lineNoPort
	}
	g, known := topo.PortGUID(fabric.GUID(node), port)
	if !known && topo.IsSwitch(fabric.GUID(node)) {
		// A switch port: the one facing a host port carries that port's
		// pkeys; port 0, the switch itself, or a port to another switch,
		// carries no change's.
		host, behind := topo.HostBehind(fabric.GUID(node), port)
		if !behind {
			return place{}, lineNoChange
		}
		g, known = host, true
	}
	if !known {
		return place{}, lineUnknownPort
	}
	pkey, _ := opensm.PKeyErrorPKey(l) // none: anyPKey
	return place{port: g, pkey: fabric.PKey(pkey)}, linePlaced
}

// failLocally fails the open jobs up to run's revision whose places the
// pkey errors name, and returns how many. ok is false when the errors cannot
// be attributed (the caller decides: settlePKeyErrors); err is a database
// error (the caller retries: the jobs failed so far stay failed, and none has
// completed).
func (t *term) failLocally(ctx context.Context, run *applyRun, lines []string) (failed int64, ok bool, err error) {
	a, ok := t.attribute(lines)
	if !ok {
		return 0, false, nil
	}
	jobs, err := t.Store.OpenJobs(ctx, run.rev)
	if err != nil {
		return 0, true, fmt.Errorf("read open jobs: %w", err)
	}
	places := jobPlaces(run.snap, t.Cfg.FlatPKey)
	for _, j := range jobs {
		named := a.named(places.of(j))
		if len(named) == 0 {
			continue
		}
		reason := "OpenSM applied the partitions file, but not this change: " + strings.Join(named, "; ")
		n, err := t.Store.FailJob(ctx, t.id, j.ID, reason)
		if err != nil {
			return failed, true, fmt.Errorf("fail job %d: %w", j.ID, err)
		}
		failed += n
	}
	return failed, true, nil
}

// named returns the lines, each after its place, that concern a job with
// the places given: those naming one of them, or the whole table of its
// port. Each line once.
func (a attribution) named(places []place) []string {
	var out []string
	seen := map[place]bool{}
	say := func(p place) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, l := range a[p] {
			out = append(out, p.String()+": "+l)
		}
	}
	for _, p := range places {
		say(p)
		say(place{port: p.port, pkey: anyPKey})
	}
	return out
}
