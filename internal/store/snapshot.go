package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// The applier reads the state at every apply, and at 10,000 ports reading
// every network and membership was most of an apply's own cost. A
// SnapshotCache keeps the state of its last read so that the next one reads
// only what changed since:
//
//   - every write of a network or a port row sets its revision to the
//     change's, which is at least the revision of any snapshot read before the
//     change committed: the rows with a revision at or after the cache's are
//     every row written since (at, not after: a change that touches no
//     partition writes its rows with the current revision, which the cache may
//     already have read);
//   - a row deleted since leaves no trace, but the counts show it: once the
//     rows written since are applied, the cache holds as many networks and as
//     many ports with a GUID as the database does unless rows were deleted,
//     and then the networks whose count differs are read again whole;
//   - every Kubernetes change sets kubernetes_state.changed_revision to its
//     own revision (it never gives it back): the Kubernetes partitions are
//     read again, whole, only when it is after the cache's;
//   - the adopted partitions are read again, whole, only when the head shows
//     a row written at or after the cache's revision (an adoption's, a
//     release's: every write of one sets its revision to the change's) or
//     a count other than the cache's (a row deleted); few, and seldom
//     changed once a switch-over is done;
//   - all of this holds only while the database's history still holds the
//     state the cache read: a restore takes the revision back, and new
//     changes take it past the cache's again, with rows the restore took
//     back below it. The cache keeps the newest job it saw, which a restore
//     cannot keep (history.go): a database that no longer holds it is read
//     whole.
//
// A read that finds the cache inconsistent with the counts after all this
// (which the rules above exclude) starts again with a full read, so the result
// is the database's state in every case, as Snapshot reads it.

// SnapshotCache is the state of the last ReadSnapshot that used it. Its zero
// value makes the next read a full one. It is not safe for concurrent use: one
// applier term owns one (a new term starts with a full read).
type SnapshotCache struct {
	valid    bool
	revision int64
	networks map[string]Network         // every recorded network, managed or not
	ports    map[string]string          // every port holding a GUID: its network
	members  map[string]*networkMembers // per network id
	managed  []string                   // the managed networks' ids, sorted
	// kubernetes is the Kubernetes partitions as of kubernetesRevision
	// (kubernetes_state.changed_revision when they were read).
	kubernetes         []KubernetesPKey
	kubernetesRevision int64
	adopted            []AdoptedPartition // every adopted partition, in pkey order
	last               SnapshotRead
	// newestJob is the newest job when the cache read: the history the
	// state it holds is of (history.go).
	newestJob int64
}

// networkMembers are the ports of one network that hold a GUID.
type networkMembers struct {
	guids  map[string]fabric.GUID // by port id
	sorted []Member               // the same GUIDs with their ports, in GUID order
}

// byGUID orders a network's members (a GUID is held by one port at most).
func byGUID(m Member, g fabric.GUID) int { return cmp.Compare(m.GUID, g) }

// SnapshotRead says what one ReadSnapshot read from the database, for tests
// and benchmarks.
type SnapshotRead struct {
	Full     bool // everything was read: the cache was empty or inconsistent
	Networks int  // network rows read
	Ports    int  // port rows read
	// NetworksRead counts the networks whose ports were read again whole
	// because some were deleted; Kubernetes says the Kubernetes partitions
	// were read; Adopted the adopted partitions.
	NetworksRead int
	Kubernetes   bool
	Adopted      bool
}

// Last says what the last read through c read.
func (c *SnapshotCache) Last() SnapshotRead { return c.last }

// snapshotDelta is what one read found, applied to the cache only once the
// read's transaction has succeeded: a failed read leaves the cache as it was.
type snapshotDelta struct {
	full        bool // everything was read: the cache is replaced
	revision    int64
	newestJob   int64
	networks    []driver.Network
	allNetworks bool // networks is every network: replace, not overlay
	ports       []driver.Port
	// reread: networks whose ports with a GUID are exactly these (read again
	// whole, or none left).
	reread     map[string][]driver.Port
	memberRows int64 // ports with a GUID, as the database counts them
	kubernetes []KubernetesPKey
	k8sRev     int64
	k8sRead    bool
	// adopted are the adopted partitions, read whole when adoptedRead:
	// when the head shows them changed, or the read is a full one.
	adopted     []AdoptedPartition
	adoptedRead bool
}

// ReadSnapshot reads the recorded state as Snapshot does, in one read-only
// transaction, reading only what changed since the state c holds, and leaves
// the new state in c. The result is the same as Snapshot's at the same
// revision; a nil c reads everything.
func (s *Store) ReadSnapshot(ctx context.Context, c *SnapshotCache) (Snapshot, error) {
	if c == nil {
		c = &SnapshotCache{}
	}
	for range 2 {
		d, err := s.readDelta(ctx, c)
		if err != nil {
			return Snapshot{}, fmt.Errorf("snapshot: %w", err)
		}
		if c.apply(d) {
			return c.snapshot(), nil
		}
		// Rows and counts disagree: never expected; a full read settles it.
		*c = SnapshotCache{}
	}
	return Snapshot{}, fmt.Errorf("snapshot: a full read disagrees with the database's counts")
}

// readDelta reads, in one read-only transaction, what changed since c: one
// query for the revision, the history and the counts (SnapshotHead), then
// the rows written since, so that a read costs a few round trips whatever
// the number of tables.
func (s *Store) readDelta(ctx context.Context, c *SnapshotCache) (snapshotDelta, error) {
	if b, ok := s.d.(driver.BatchReader); ok && c.valid && c.newestJob > 0 {
		d, enough, err := s.readBatched(ctx, b, c)
		if err != nil || enough {
			return d, err
		}
		// What it found asks for more reads (below), in one transaction
		// with the rows they complete.
	}
	var d snapshotDelta
	err := s.d.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
		d = snapshotDelta{reread: map[string][]driver.Port{}}
		h, err := q.SnapshotHead(ctx, s.FabricName(), c.newestJob, c.revision)
		if err != nil {
			return err
		}
		d.revision, d.newestJob, d.memberRows, d.k8sRev = h.Revision, h.NewestJob, h.Members, h.KubernetesRevision
		// A database that went back (restored from a backup) is read whole,
		// whatever revision new changes brought it to since (history.go:
		// the history is the same while the newest job c read is kept).
		d.full = !c.valid || d.revision < c.revision || c.newestJob <= 0 || h.KeptJobs == 0
		since := c.revision
		if d.full {
			since = 0
		}
		if d.networks, err = q.ListNetworksSince(ctx, s.FabricName(), since); err != nil {
			return err
		}
		d.allNetworks = d.full
		if !d.full && c.networksAfter(d.networks) != h.Networks {
			// A network was deleted: the table of networks is small beside
			// the ports'.
			if d.networks, err = q.ListNetworksSince(ctx, s.FabricName(), 0); err != nil {
				return err
			}
			d.allNetworks = true
		}
		if d.ports, err = q.ListPortsSince(ctx, s.FabricName(), since); err != nil {
			return err
		}
		if !d.full && c.membersAfter(d.ports) != d.memberRows {
			// Ports were deleted: find the networks that lost some.
			if err := c.findDeleted(ctx, s.FabricName(), q, &d); err != nil {
				return err
			}
		}
		if d.adoptedRead = d.full || c.adoptedChanged(h); d.adoptedRead {
			if d.adopted, err = listAdopted(ctx, s.FabricName(), q); err != nil {
				return err
			}
		}
		if d.full || d.k8sRev != c.kubernetesRevision {
			d.k8sRead = true
			d.kubernetes, err = kubernetesPKeys(ctx, s.FabricName(), q)
			return err
		}
		return nil
	})
	return d, err
}

// readBatched is readDelta's usual read, after changes that deleted no row,
// on an engine that sends a transaction's independent queries together: the
// head and the rows written since c's revision in one round trip rather than
// one each. Enough is false when what it found asks for more than those rows
// (a full read, rows deleted since, the Kubernetes or the adopted partitions
// changed): readDelta then reads again, in a transaction of its own, since
// the reads that follow must see the state this one saw.
func (s *Store) readBatched(ctx context.Context, b driver.BatchReader, c *SnapshotCache) (d snapshotDelta, enough bool, err error) {
	d = snapshotDelta{reread: map[string][]driver.Port{}}
	var h driver.SnapshotHeadRow
	fab := s.FabricName()
	err = b.ReadBatch(ctx,
		func(q driver.Queries) (err error) {
			h, err = q.SnapshotHead(ctx, fab, c.newestJob, c.revision)
			return err
		},
		func(q driver.Queries) (err error) {
			d.networks, err = q.ListNetworksSince(ctx, fab, c.revision)
			return err
		},
		func(q driver.Queries) (err error) {
			d.ports, err = q.ListPortsSince(ctx, fab, c.revision)
			return err
		})
	if err != nil {
		return d, false, err
	}
	d.revision, d.newestJob, d.memberRows, d.k8sRev = h.Revision, h.NewestJob, h.Members, h.KubernetesRevision
	// readDelta's conditions for a read of the rows since c's revision, and
	// nothing more.
	enough = d.revision >= c.revision && h.KeptJobs > 0 && d.k8sRev == c.kubernetesRevision && !c.adoptedChanged(h) &&
		c.networksAfter(d.networks) == h.Networks && c.membersAfter(d.ports) == d.memberRows
	return d, enough, nil
}

// adoptedChanged says whether the adopted partitions may differ from c's,
// by head h read with c's revision: a row written since (at or after it) or
// deleted (the count differs; a row added with it was written since).
func (c *SnapshotCache) adoptedChanged(h driver.SnapshotHeadRow) bool {
	return h.AdoptedSince > 0 || h.Adopted != int64(len(c.adopted))
}

// networksAfter is how many networks c would hold with rows overlaid.
func (c *SnapshotCache) networksAfter(rows []driver.Network) int64 {
	n := int64(len(c.networks))
	for _, r := range rows {
		if _, ok := c.networks[r.ID]; !ok {
			n++
		}
	}
	return n
}

// membersAfter is how many ports with a GUID c would hold with rows
// overlaid.
func (c *SnapshotCache) membersAfter(rows []driver.Port) int64 {
	n := int64(len(c.ports))
	for _, p := range rows {
		if _, ok := c.ports[p.ID]; ok {
			n--
		}
		if p.Guid != nil {
			n++
		}
	}
	return n
}

// findDeleted sets d.reread to the networks whose count of ports with a GUID,
// with d.ports overlaid on c, is not the database's: those that lost ports
// since c was read, each with its ports as they are now.
func (c *SnapshotCache) findDeleted(ctx context.Context, fabric string, q driver.Queries, d *snapshotDelta) error {
	counts, err := q.CountMembersByNetwork(ctx, fabric)
	if err != nil {
		return err
	}
	after := make(map[string]int64, len(c.members))
	for id, m := range c.members {
		after[id] = int64(len(m.guids))
	}
	for _, p := range d.ports {
		if net, ok := c.ports[p.ID]; ok {
			after[net]--
		}
		if p.Guid != nil {
			after[p.NetworkID]++
		}
	}
	db := make(map[string]int64, len(counts))
	for _, r := range counts {
		db[r.NetworkID] = r.N
		if _, ok := after[r.NetworkID]; !ok {
			after[r.NetworkID] = 0 // cannot be: read it
		}
	}
	for id, n := range after {
		switch {
		case db[id] == n:
		case db[id] == 0:
			d.reread[id] = nil
		default:
			if d.reread[id], err = q.ListPortsOfNetwork(ctx, fabric, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply brings c to the state d read; false when the result disagrees with
// the database's counts (c is then to be discarded).
func (c *SnapshotCache) apply(d snapshotDelta) bool {
	if d.full {
		*c = SnapshotCache{networks: map[string]Network{}, ports: map[string]string{},
			members: map[string]*networkMembers{}}
	}
	read := SnapshotRead{Full: d.full, Networks: len(d.networks), Ports: len(d.ports),
		NetworksRead: len(d.reread), Kubernetes: d.k8sRead, Adopted: d.adoptedRead}
	for _, rows := range d.reread {
		read.Ports += len(rows)
	}
	if d.allNetworks {
		clear(c.networks)
	}
	networksChanged := d.allNetworks || len(d.networks) > 0
	for _, r := range d.networks {
		c.networks[r.ID] = network(r)
	}
	touched := map[string]bool{}
	for _, p := range d.ports {
		c.removePort(p.ID, touched)
		if p.Guid != nil {
			c.addPort(p.ID, p.NetworkID, *p.Guid, touched)
		}
	}
	for id, rows := range d.reread {
		if m := c.members[id]; m != nil {
			for port := range m.guids {
				delete(c.ports, port)
			}
		}
		m := &networkMembers{guids: map[string]fabric.GUID{}}
		for _, p := range rows {
			if p.Guid != nil && p.NetworkID == id {
				c.ports[p.ID] = id
				m.guids[p.ID] = *p.Guid
			}
		}
		c.members[id] = m
		touched[id] = true
	}
	for id := range touched {
		m := c.members[id]
		switch {
		case m == nil:
		case len(m.guids) == 0:
			delete(c.members, id)
		case len(m.sorted) != len(m.guids) || d.reread[id] != nil:
			// Built again from the ports: a GUID that moved between two
			// ports of the network, or a network read again.
			m.sorted = m.sorted[:0]
			for port, g := range m.guids {
				m.sorted = append(m.sorted, Member{NetworkID: id, GUID: g, PortID: port})
			}
			slices.SortFunc(m.sorted, func(a, b Member) int { return cmp.Compare(a.GUID, b.GUID) })
		}
	}
	if networksChanged {
		c.managed = c.managed[:0]
		for id, n := range c.networks {
			if n.Managed {
				c.managed = append(c.managed, id)
			}
		}
		slices.Sort(c.managed)
	}
	if d.k8sRead {
		c.kubernetes = d.kubernetes
	}
	if d.adoptedRead {
		c.adopted = d.adopted
	}
	c.kubernetesRevision = d.k8sRev
	c.revision, c.newestJob, c.valid, c.last = d.revision, d.newestJob, true, read
	return int64(len(c.ports)) == d.memberRows
}

// removePort takes port out of c, if it holds a GUID there.
func (c *SnapshotCache) removePort(port string, touched map[string]bool) {
	net, ok := c.ports[port]
	if !ok {
		return
	}
	delete(c.ports, port)
	m := c.members[net]
	g := m.guids[port]
	delete(m.guids, port)
	if i, found := slices.BinarySearchFunc(m.sorted, g, byGUID); found {
		m.sorted = slices.Delete(m.sorted, i, i+1)
	}
	touched[net] = true
}

// addPort records that port holds guid in network net.
func (c *SnapshotCache) addPort(port, net string, guid fabric.GUID, touched map[string]bool) {
	m := c.members[net]
	if m == nil {
		m = &networkMembers{guids: map[string]fabric.GUID{}}
		c.members[net] = m
	}
	c.ports[port] = net
	m.guids[port] = guid
	i, found := slices.BinarySearchFunc(m.sorted, guid, byGUID)
	if found { // taken from another port of the network, whose row follows (then all is built again)
		m.sorted[i].PortID = port
	} else {
		m.sorted = slices.Insert(m.sorted, i, Member{NetworkID: net, GUID: guid, PortID: port})
	}
	touched[net] = true
}

// snapshot is the state c holds, as Snapshot returns it: fresh slices, which
// the caller may keep.
func (c *SnapshotCache) snapshot() Snapshot {
	snap := Snapshot{Revision: c.revision, NewestJob: c.newestJob, Networks: make([]Network, 0, len(c.managed)), Kubernetes: c.kubernetes,
		Adopted: slices.Clone(c.adopted)}
	n := 0
	for _, id := range c.managed {
		if m := c.members[id]; m != nil {
			n += len(m.sorted)
		}
	}
	snap.Members = make([]Member, 0, n)
	for _, id := range c.managed {
		snap.Networks = append(snap.Networks, c.networks[id])
		if m := c.members[id]; m != nil {
			snap.Members = append(snap.Members, m.sorted...)
		}
	}
	if len(snap.Members) == 0 {
		snap.Members = nil
	}
	return snap
}

// sortSnapshot puts a snapshot in the order ReadSnapshot gives: networks by
// id, members by network id then GUID, in byte order whatever the database's
// collation.
func sortSnapshot(snap *Snapshot) {
	slices.SortFunc(snap.Networks, func(a, b Network) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(snap.Members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.NetworkID, b.NetworkID), cmp.Compare(a.GUID, b.GUID))
	})
}
