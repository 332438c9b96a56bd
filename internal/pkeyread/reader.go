package pkeyread

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Target is a host port to read, where OpenSM's last sweep put it.
type Target struct {
	Port fabric.GUID
	LID  uint16
	// Path is the directed route OpenSM's subnet dump gives to the port:
	// tried when the LID does not answer (none known: the LID alone).
	Path DRPath
	// Switch is the switch port facing Port, read too unless its GUID is 0.
	Switch SwitchPort
}

// SwitchPort is an external port of a switch.
type SwitchPort struct {
	GUID fabric.GUID // node GUID
	LID  uint16      // the switch's (port 0's) LID
	Path DRPath      // the directed route to the switch, as Target.Path
	Port int
}

// Result is what one Target's read found.
type Result struct {
	Target      Target
	PKeys       Table // the host port's table
	SwitchPKeys Table // the switch port's table; nil when not read
	// Err says why the read failed (no answer: the port is down or gone; a
	// LID that answers as another port); the tables are then not to be used.
	Err error
}

// Defaults of a Reader's zero fields: DefaultWorkers ports read at once
// (OpenSM's max_wire_smps default), at most DefaultWireSMPs SMPs
// outstanding in all.
const (
	DefaultWorkers     = 4
	DefaultWireSMPs    = 8
	DefaultPortTimeout = 2 * time.Second
)

// portSMPs bounds the SMPs outstanding for one port's read, on its worker's
// one connection: the host port's NodeInfo and first block, its switch's
// NodeInfo and SwitchInfo and the switch port's first block go out
// together. It stays well under the ten datagrams a Unix socket queues
// (net.unix.max_dgram_qlen's default), the simulator's to each client and
// the client's own.
const portSMPs = 5

// Reader reads P_Key tables on connections from Dialer, at most Workers ports
// at once, each port's reads (all its SMPs) within PortTimeout. A host port
// costs five SMPs (its NodeInfo and two table blocks, its switch port's two
// blocks); each switch two more a Read (its NodeInfo and SwitchInfo), however
// many of its ports are read. A port's SMPs that do not wait for another's
// answer are outstanding together on its worker's connection, when the
// connection says it takes overlapping Sends (Concurrent): at most portSMPs
// for the port, WireSMPs for the Read.
type Reader struct {
	Dialer Dialer
	MKey   uint64 // sent in every SMP; 0 where none is set
	// MKeys, when set, gives the M_Keys to try at each Read in place of
	// MKey, newest first: the key can change while the manager runs (a key
	// rotation), and while OpenSM moves the ports to the new one some still
	// carry the old one. A port that does not answer with one key is read
	// again with the next, each within PortTimeout; the key that last
	// answered is tried first, so that only ports that answer to none pay
	// for every key.
	MKeys       func(ctx context.Context) ([]uint64, error)
	Workers     int
	WireSMPs    int // SMPs outstanding in all; 0: DefaultWireSMPs
	PortTimeout time.Duration

	tid      atomic.Uint32
	answered atomic.Uint64 // the M_Key that last answered, with MKeys

	mu       sync.Mutex
	lastKeys []uint64 // what MKeys last gave
}

// fetchKeys are the M_Keys MKeys gives now (none: 0), kept for the next Read.
func (r *Reader) fetchKeys(ctx context.Context) ([]uint64, error) {
	keys, err := r.MKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("the M_Key: %w", err)
	}
	if len(keys) == 0 {
		keys = []uint64{0}
	}
	keys = slices.Clone(keys)
	r.mu.Lock()
	r.lastKeys = keys
	r.mu.Unlock()
	return keys, nil
}

// ordered is keys with the one that last answered first.
func (r *Reader) ordered(keys []uint64) []uint64 {
	keys = slices.Clone(keys)
	if i := slices.Index(keys, r.answered.Load()); i > 0 {
		keys[0], keys[i] = keys[i], keys[0]
	}
	return keys
}

// Read reads every target and returns their results in targets' order. It
// returns when all are read, failed, or ctx is done (the ports not read by
// then fail with ctx's error).
//
// With MKeys, the keys are asked for at every Read, and that ask (a
// database read, on a change's path) overlaps the reads: they start with
// the keys the last Read was given, and what they found is returned only
// if MKeys gives the same keys now. Otherwise (a rotation) they are cut
// short and the targets read again with the new keys; an MKeys that fails
// fails every port, as if nothing had been read. Which key a port answered
// to proves nothing about its table (an M_Key only opens the port to Gets):
// a key the last Read was given was one the manager held then, and is
// tried during a rotation anyway.
func (r *Reader) Read(ctx context.Context, targets []Target) []Result {
	if r.MKeys == nil {
		return r.read(ctx, targets, []uint64{r.MKey})
	}
	r.mu.Lock()
	last := r.lastKeys
	r.mu.Unlock()
	if last == nil { // the first Read: nothing to start with
		keys, err := r.fetchKeys(ctx)
		if err != nil {
			return keyless(targets, err)
		}
		return r.read(ctx, targets, r.ordered(keys))
	}
	early, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		keys []uint64
		err  error
	}
	now := make(chan fetched, 1)
	go func() {
		keys, err := r.fetchKeys(ctx)
		if err != nil || !slices.Equal(keys, last) {
			cancel() // what the reads find is not to be used
		}
		now <- fetched{keys, err}
	}()
	results := r.read(early, targets, r.ordered(last))
	f := <-now
	if f.err != nil {
		return keyless(targets, f.err)
	}
	if slices.Equal(f.keys, last) {
		return results
	}
	return r.read(ctx, targets, r.ordered(f.keys))
}

// keyless are the results of targets not read for want of their M_Keys.
func keyless(targets []Target, err error) []Result {
	results := make([]Result, len(targets))
	for i, t := range targets {
		results[i] = Result{Target: t, Err: fmt.Errorf("port %s not read: %w", t.Port, err)}
	}
	return results
}

// read reads every target with keys (Read).
func (r *Reader) read(ctx context.Context, targets []Target, keys []uint64) []Result {
	results := make([]Result, len(targets))
	next := make(chan int)
	workers := min(orDefault(r.Workers, DefaultWorkers), len(targets))
	// Many host ports sit behind one switch: its NodeInfo and SwitchInfo are
	// read once for all of them, but only within this Read, since a switch
	// may be replaced (or re-LIDed) between two.
	switches := &switchReads{reads: map[switchKey]*switchRead{}}
	wire := make(chan struct{}, orDefault(r.WireSMPs, DefaultWireSMPs))
	// A port's SMPs overlap only where each port has a worker of its own: a
	// read of more ports (an audit, a boot storm's read-back) keeps the
	// simulator busy with a worker's one SMP at a time already, and
	// overlapping there only cost CPU and time (BenchmarkReadCost at 1,500
	// ports: a third more CPU a port, up to twice the time).
	overlap := len(targets) <= orDefault(r.Workers, DefaultWorkers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			w := worker{r: r, switches: switches, keys: keys, wire: wire, overlap: overlap}
			defer w.close()
			for i := range next {
				results[i] = w.read(ctx, targets[i])
			}
		})
	}
	handOut(ctx, next, results, targets)
	wg.Wait()
	return results
}

// handOut hands each target's index to the workers until ctx ends; the
// targets left then are not read, and their results say so at once, without
// a turn of a worker each: an audit of every port that gives way to a
// change heard of it 2-5 ms later that way at 1,500 ports
// (BenchmarkReadCancelled).
func handOut(ctx context.Context, next chan<- int, results []Result, targets []Target) {
	defer close(next)
	for i := range targets {
		if ctx.Err() == nil {
			select {
			case next <- i:
				continue
			case <-ctx.Done():
			}
		}
		for j := i; j < len(targets); j++ {
			results[j] = Result{Target: targets[j], Err: notRead{port: targets[j].Port, cause: ctx.Err()}}
		}
		return
	}
}

// notRead is ErrNotRead for a port, formatted only when read: a read cut
// short leaves hundreds of them, which its caller mostly drops.
type notRead struct {
	port  fabric.GUID
	cause error // ctx's
}

func (e notRead) Error() string   { return fmt.Sprintf("port %s %v: %v", e.port, ErrNotRead, e.cause) }
func (e notRead) Unwrap() []error { return []error{ErrNotRead, e.cause} }

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// worker reads one port at a time on a connection of its own, opened at its
// first read and again after a failed one (a lost answer may leave a late
// one behind). The port's SMPs run on goroutines of its own (lanes, and
// SMPs sent ahead), all ended before the next port.
type worker struct {
	r        *Reader
	switches *switchReads // shared by the Read's workers
	conn     Conn
	keys     []uint64      // the M_Keys to try, the one that last answered first
	mkey     uint64        // the one being tried
	wire     chan struct{} // the Read's SMPs outstanding (WireSMPs)
	slots    chan struct{} // the port's SMPs outstanding on conn (portSMPs, or 1)
	overlap  bool          // a port's SMPs overlap (Read); else one after another
	smps     sync.WaitGroup

	mu sync.Mutex
	// window is the attempts' window of the port being read (attemptCtx),
	// derived from windowOf, the port's context; spent are the windows an
	// attempt lost in, ended with the port.
	window       context.Context
	windowOf     context.Context
	endWindowCtx context.CancelFunc
	spent        []context.CancelFunc
}

func (w *worker) close() {
	w.endWindow()
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

func (w *worker) read(ctx context.Context, t Target) Result {
	res := Result{Target: t}
	if err := ctx.Err(); err != nil {
		res.Err = notRead{port: t.Port, cause: err}
		return res
	}
	if t.LID == 0 || (t.Switch.GUID != 0 && t.Switch.LID == 0) {
		// LID 0 reaches no port: OpenSM has not given it one (yet).
		res.Err = fmt.Errorf("port %s not read: %w", t.Port, ErrNoLID)
		return res
	}
	for i, key := range w.keys {
		w.mkey = key
		res = w.readWith(ctx, t)
		// A port that answered as another (ErrMoved) accepted the key.
		if res.Err == nil || errors.Is(res.Err, ErrMoved) {
			if len(w.keys) > 1 {
				w.r.answered.Store(key)
			}
			return res
		}
		if ctx.Err() != nil || i == len(w.keys)-1 {
			break
		}
	}
	return res
}

// readWith reads t with w.mkey, within PortTimeout.
func (w *worker) readWith(ctx context.Context, t Target) Result {
	res := Result{Target: t}
	ctx, cancel := context.WithTimeout(ctx, orDefault(w.r.PortTimeout, DefaultPortTimeout))
	defer cancel()
	defer w.endWindow()
	if err := w.open(ctx); err != nil {
		res.Err = fmt.Errorf("port %s not read: %w", t.Port, err)
		return res
	}
	res.PKeys, res.SwitchPKeys, res.Err = w.tables(ctx, t)
	if res.Err != nil {
		res.PKeys, res.SwitchPKeys = nil, nil
		w.close()
	}
	return res
}

// open opens w's connection unless it is open: up to portSMPs outstanding
// on it when it takes overlapping Sends, else one.
func (w *worker) open(ctx context.Context) error {
	if w.conn != nil {
		return nil
	}
	conn, err := w.r.Dialer.Dial(ctx)
	if err != nil {
		return err
	}
	w.conn = conn
	w.slots = make(chan struct{}, 1)
	if Concurrent(conn) && w.overlap {
		w.slots = make(chan struct{}, portSMPs)
	}
	return nil
}

// tables reads the host port's table and its switch port's at once, each
// lane's identity check deciding before its table is used. The first lane
// to fail ends the other (its SMPs are cancelled, their answers dropped)
// and its error is the port's: a lane cut short by the other's failure
// says nothing of its own port.
func (w *worker) tables(ctx context.Context, t Target) (host, sw Table, err error) {
	if !w.overlap {
		if host, err = w.hostTable(ctx, t); err == nil && t.Switch.GUID != 0 {
			sw, err = w.switchTable(ctx, t.Switch)
		}
		if err != nil {
			return nil, nil, err
		}
		return host, sw, nil
	}
	ctx, abort := context.WithCancel(ctx)
	defer abort()
	var once sync.Once
	fail := func(e error) {
		once.Do(func() { err = e; abort() })
	}
	if t.Switch.GUID != 0 {
		w.smps.Go(func() {
			keys, e := w.switchTable(ctx, t.Switch)
			if e != nil {
				fail(e)
				return
			}
			sw = keys
		})
	}
	keys, e := w.hostTable(ctx, t)
	if e != nil {
		fail(e)
	} else {
		host = keys
	}
	// On success every SMP sent ahead was used; on a failure, fail ended
	// the ones still outstanding.
	w.smps.Wait()
	if err != nil {
		return nil, nil, err
	}
	return host, sw, nil
}

// hostTable reads the table of the host port at t.LID, once it answered as
// t.Port.
func (w *worker) hostTable(ctx context.Context, t Target) (Table, error) {
	// A host behind a switch that answered only by its directed route is
	// most likely beyond the LIDs' reach too: its route first, so that each
	// host there costs no SMP lost by LID (on real hardware, a wait).
	at := via{lid: t.LID, path: t.Path, dr: t.Path.Known() && w.switches.byRoute(t.Switch)}
	// Every table has a block 0: it is asked for with the NodeInfo, and
	// used only once the NodeInfo proved the port (table).
	block0 := w.ahead(ctx, at, attrPKeyTable, pkeyModifier(0, 0))
	data, err := w.get(ctx, &at, attrNodeInfo, 0)
	if err != nil {
		return nil, fmt.Errorf("port %s at LID %d: NodeInfo: %w", t.Port, t.LID, err)
	}
	ni := parseNodeInfo(data)
	if fabric.GUID(ni.portGUID) != t.Port || ni.nodeType == nodeSwitch {
		return nil, fmt.Errorf("port %s at LID %d: %w: the %s answers as port %s (node type %d)",
			t.Port, t.LID, ErrMoved, at.String(), fabric.GUID(ni.portGUID), ni.nodeType)
	}
	keys, err := w.table(ctx, &at, 0, ni.partitionCap, block0)
	if err != nil {
		return nil, fmt.Errorf("port %s at LID %d: %w", t.Port, t.LID, err)
	}
	return keys, nil
}

// ErrNotRead is the error of a target that ctx ended before its turn: it
// was not tried, and says nothing of the port.
var ErrNotRead = errors.New("not read")

// ErrNoLID is the error of a target whose port, or switch, has no LID.
var ErrNoLID = errors.New("no LID assigned (not swept yet?)")

// ErrMoved is the error of a LID, or a directed route, that answers as
// another port than the one OpenSM's last sweep put there.
var ErrMoved = errors.New("not at its LID")

// switchTable reads the table of switch port s, once the switch at s.LID
// answered as s.GUID. What the switch answered is judged for each port
// anew, so that every port behind a switch that is not at its LID fails with
// ErrMoved, saying which port it is.
func (w *worker) switchTable(ctx context.Context, s SwitchPort) (Table, error) {
	where := fmt.Sprintf("switch %s port %d at LID %d", s.GUID, s.Port, s.LID)
	// The port's block 0 goes with the switch's NodeInfo (when this read
	// asks it), used only once the switch proved to be s.GUID's (table).
	block0 := w.ahead(ctx, via{lid: s.LID, path: s.Path, dr: s.Path.Known() && w.switches.byRoute(s)},
		attrPKeyTable, pkeyModifier(s.Port, 0))
	sw, err := w.switches.read(ctx, s, w.readSwitch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ni := sw.node
	// The route its NodeInfo answered by first: a switch beyond the LIDs'
	// reach costs each of its ports no lost SMP.
	at := via{lid: s.LID, path: s.Path, dr: sw.dr}
	if fabric.GUID(ni.nodeGUID) != s.GUID || ni.nodeType != nodeSwitch {
		return nil, fmt.Errorf("%s: %w: the %s answers as node %s (node type %d)",
			where, ErrMoved, at.String(), fabric.GUID(ni.nodeGUID), ni.nodeType)
	}
	if s.Port < 1 || s.Port > int(ni.ports) {
		return nil, fmt.Errorf("%s: the switch has ports 1 to %d", where, ni.ports)
	}
	keys, err := w.table(ctx, &at, s.Port, sw.partitionCap, block0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return keys, nil
}

// switchAnswer is what a switch answered at its LID: who it is, and, when it
// is the switch looked for, the size of its ports' tables.
type switchAnswer struct {
	node         nodeInfo
	partitionCap uint16 // from SwitchInfo; 0 when not read
	dr           bool   // it answered by its directed route, not its LID
}

// readSwitch asks the node at s.LID who it is and, when it is s.GUID's
// switch, its SwitchInfo. A node other than s.GUID's is an answer too (the
// ports behind s judge it), not an error.
func (w *worker) readSwitch(ctx context.Context, s SwitchPort) (switchAnswer, error) {
	at := via{lid: s.LID, path: s.Path}
	// SwitchInfo goes with the NodeInfo, used only once the NodeInfo
	// proved the switch (ahead.use).
	info := w.ahead(ctx, at, attrSwitchInfo, 0)
	data, err := w.get(ctx, &at, attrNodeInfo, 0)
	if err != nil {
		return switchAnswer{}, fmt.Errorf("NodeInfo: %w", err)
	}
	a := switchAnswer{node: parseNodeInfo(data), dr: at.dr}
	if fabric.GUID(a.node.nodeGUID) != s.GUID || a.node.nodeType != nodeSwitch {
		return a, nil
	}
	data, err = info.use(ctx, w, &at)
	if err != nil {
		return switchAnswer{}, fmt.Errorf("SwitchInfo: %w", err)
	}
	a.partitionCap = switchPartitionCap(data)
	return a, nil
}

// switchReads are one Read's reads of its switches, one per switch (its GUID
// at its LID), shared by the workers: the first port behind a switch reads
// it, the others wait for that read. A failed read is not kept: it says
// that the port whose read it was got no answer within its own deadline (or
// was cancelled), not that the switch is gone, so the next port behind the
// switch reads it again, and each port's error is its own attempt's. What a
// switch answered is trusted for the rest of the Read: a switch whose LID is
// given to another node during one Read (a sweep between two of its ports'
// reads) is noticed at the next Read, not by the ports read after the sweep.
type switchReads struct {
	mu    sync.Mutex
	reads map[switchKey]*switchRead
}

type switchKey struct {
	guid fabric.GUID
	lid  uint16
}

// switchRead is one switch's read: done is closed once it ended.
type switchRead struct {
	done   chan struct{}
	answer switchAnswer
	err    error
}

// byRoute says whether the switch s answered this Read by its directed
// route, not its LID.
func (sr *switchReads) byRoute(s SwitchPort) bool {
	sr.mu.Lock()
	r, ok := sr.reads[switchKey{s.GUID, s.LID}]
	sr.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-r.done:
		return r.err == nil && r.answer.dr
	default:
		return false // under way
	}
}

// read returns what the switch s answered, reading it with readSwitch unless
// another port's read of it succeeded or is under way (then waiting for that
// one, within ctx).
func (sr *switchReads) read(ctx context.Context, s SwitchPort,
	readSwitch func(context.Context, SwitchPort) (switchAnswer, error)) (switchAnswer, error) {
	key := switchKey{s.GUID, s.LID}
	for {
		sr.mu.Lock()
		r, ok := sr.reads[key]
		if !ok {
			r = &switchRead{done: make(chan struct{})}
			sr.reads[key] = r
		}
		sr.mu.Unlock()
		if !ok {
			r.answer, r.err = readSwitch(ctx, s)
			if r.err != nil {
				sr.mu.Lock()
				delete(sr.reads, key) // before done: a waiter then reads anew
				sr.mu.Unlock()
			}
			close(r.done)
			return r.answer, r.err
		}
		select {
		case <-r.done:
			if r.err == nil {
				return r.answer, nil
			}
			// Another port's read failed: this port tries in its own time,
			// if it has any left.
			if ctx.Err() == nil {
				continue
			}
		case <-ctx.Done():
		}
		return switchAnswer{}, fmt.Errorf("NodeInfo, SwitchInfo (read for another port behind the switch): no answer: %w", ctx.Err())
	}
}

// table reads the entries blocks of port's table at the node at (port 0
// for an HCA's port), once that node proved to be the one read: block 0 is
// block0's answer (sent ahead), the others are outstanding together.
func (w *worker) table(ctx context.Context, at *via, port int, entries uint16, block0 *pending) (Table, error) {
	if entries == 0 {
		return nil, errors.New("the port reports no P_Key table")
	}
	blocks := make([]*pending, (int(entries)+pkeysPerBlock-1)/pkeysPerBlock)
	for block := 1; block < len(blocks); block++ {
		blocks[block] = w.ahead(ctx, *at, attrPKeyTable, pkeyModifier(port, block))
	}
	var keys Table
	for block := range blocks {
		var data []byte
		var err error
		if block == 0 {
			data, err = block0.use(ctx, w, at)
		} else {
			data, err = blocks[block].use(ctx, w, at)
		}
		if err != nil {
			return nil, fmt.Errorf("P_KeyTable block %d: %w", block, err)
		}
		keys = appendPKeys(keys, data)
	}
	return keys, nil
}
