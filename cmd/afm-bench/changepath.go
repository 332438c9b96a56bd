package main

import (
	"fmt"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// changePath splits each change's latency, POST sent → its job read
// Completed, along its path, one sample a change. The phases follow one
// another: their sum is the change's latency (to the microseconds between
// the manager's clock readings), but their medians need not sum to its
// median.
type changePath struct {
	wait     latencies // POST sent → its apply's start (the commit, the wake-up, a running apply)
	render   latencies // the manager's render: snapshot, render, check
	write    latencies // writing the file and its fsync, SIGHUP sent (osmSweep's hup); the jobs' marking runs beside it and the sweep
	sweep    latencies // OpenSM's own sweep: SIGHUP sent → SUBNET UP by OpenSM's time stamp
	endRead  latencies // SUBNET UP logged → read by the manager (its log tail, the file's sync)
	verify   latencies // the changed ports' tables read back
	complete latencies // record, capacity, gates, second-SM look, the jobs' completion
	client   latencies // the apply's line logged → the client read Completed (its poll; not in the latency)
	// own: POST → Completed (committed) less OpenSM's own sweep of its
	// apply, all the manager adds to OpenSM's work.
	own latencies
	// ownRead is the older figure: POST → Completed less the apply's sweep
	// as the manager read it, which counts the end's read as OpenSM's.
	ownRead latencies
}

// change is one change as the client timed it, on the bench's clock (the
// machine's, as the manager's and OpenSM's).
type change struct{ sent, done time.Time }

// committed is when c's job was Completed for every reader: the client's
// first read of it, or the line of the apply that completed it when that
// came first. The line is logged once the jobs' transaction committed, so
// a GET sent then reads Completed: the latency is the manager's, not the
// client's poll's. Polled finely instead, through a large fabric's sweep,
// the client loaded the manager whose overhead is measured (its GETs were
// a third of the manager's CPU in a 1,500-host sweep).
func (c change) committed(a applyTimes) time.Time {
	if a.logged.Before(c.done) {
		return a.logged
	}
	return c.done
}

// osmSweep is an apply's sweep on one clock: its SIGHUP, and OpenSM's own
// time stamp on the sweep's SUBNET UP.
type osmSweep struct{ hup, up time.Time }

// pathOf pairs the i-th change with the i-th apply of split and the i-th
// sweep of sweeps (sweepsOf).
func pathOf(changes []change, split applySplit, sweeps []osmSweep) (changePath, error) {
	var p changePath
	if len(changes) != len(split.at) || len(sweeps) != len(split.at) {
		return p, fmt.Errorf("%d changes, %d applies and %d sweeps cannot be paired", len(changes), len(split.at), len(sweeps))
	}
	for i, c := range changes {
		a, s := split.at[i], sweeps[i]
		sweep := s.up.Sub(s.hup)
		p.wait = append(p.wait, a.started.Sub(c.sent))
		p.render = append(p.render, split.render[i])
		p.write = append(p.write, s.hup.Sub(a.rendered))
		p.sweep = append(p.sweep, sweep)
		p.endRead = append(p.endRead, a.swept.Sub(s.up))
		if i < len(split.verify) {
			p.verify = append(p.verify, split.verify[i])
		}
		p.complete = append(p.complete, split.complete[i])
		p.client = append(p.client, c.done.Sub(a.logged))
		done := c.committed(a)
		p.own = append(p.own, done.Sub(c.sent)-sweep)
		p.ownRead = append(p.ownRead, done.Sub(c.sent)-split.sweep[i])
	}
	return p, nil
}

// sweepsOf finds, for each apply, the sweep whose end the manager read: the
// last "SUBNET UP" OpenSM logged by the time the manager read its sweep's
// end, after the apply began writing its file, and the heavy sweep it ended.
// Pairing by the first heavy sweep begun after the render instead paired an
// apply with a later sweep whenever OpenSM stamped its sweep's start before
// the manager's clock read the render (two clocks' readings a few
// microseconds apart): its SUBNET UP then came after the manager's read, and
// the run failed. Its SIGHUP is the manager's clock reading once the kill
// returned, or OpenSM's stamp on the sweep's start when that is earlier and
// after the render: OpenSM may take the signal and log its start before the
// manager reads its clock, and the signal was sent before either. entries
// are OpenSM's log from before the first apply; its time stamps (local time,
// no year) are read in loc.
func sweepsOf(entries []opensm.Entry, applies []applyTimes, loc *time.Location) ([]osmSweep, error) {
	sweeps := make([]osmSweep, 0, len(applies))
	j := 0
	for i, a := range applies {
		upAt, up, began, lastStart := -1, time.Time{}, time.Time{}, time.Time{}
		for k := j; k < len(entries); k++ {
			e := entries[k]
			at, err := logTimeIn(e.Time, a.rendered, loc)
			if err != nil {
				return nil, err
			}
			if at.After(a.swept) {
				break
			}
			switch {
			case e.Title == "INITIATING HEAVY SWEEP":
				lastStart = at
			case e.Message == "SUBNET UP" && !at.Before(a.rendered):
				upAt, up, began = k, at, lastStart
			}
		}
		if upAt < 0 {
			return nil, fmt.Errorf("apply %d (signalled %s): no SUBNET UP in OpenSM's log between its render and the "+
				"manager's read of its sweep's end at %s", i+1, a.signalled.Format(time.RFC3339Nano),
				a.swept.Format(time.RFC3339Nano))
		}
		hup := a.signalled
		if began.Before(hup) && !began.Before(a.rendered) {
			hup = began
		}
		sweeps = append(sweeps, osmSweep{hup: hup, up: up})
		j = upAt + 1
	}
	return sweeps, nil
}

// readEntries parses OpenSM's log from position from to its end.
func readEntries(logPath string, from opensm.Position) ([]opensm.Entry, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from.Offset, 0); err != nil {
		return nil, err
	}
	entries, err := opensm.ParseLog(f)
	if err != nil {
		return nil, fmt.Errorf("read OpenSM's log: %w", err)
	}
	return entries, nil
}
