package manager

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// readbackWorkers is how many ports the read-back proof reads at once: the
// simulated fabric serves ten clients, OpenSM and the operators' tools among
// them.
const readbackWorkers = 4

// newReadback is the reader of the ports' P_Key tables the applier proves
// jobs with ([opensm] verify = tables); nil for verify = log. A manager that
// cannot read the fabric refuses to start rather than complete jobs on a
// proof it was told not to trust alone.
func newReadback(ctx context.Context, cfg config.FabricConfig, mkeys *readbackMKeys) (*pkeyread.Reader, error) {
	if cfg.OpenSM.Verify == config.VerifyLog {
		return nil, nil
	}
	r, _, err := fabricReader(ctx, cfg, mkeys, readbackWorkers)
	if err != nil {
		return nil, fmt.Errorf("[opensm] verify = tables: %w (verify = log completes jobs on OpenSM's log alone)", err)
	}
	return r, nil
}

// fabricReader reads the fabric OpenSM programs, on workers connections, one
// of them kept open between reads on an HCA (pkeyread.Pool):
// the simulator OpenSM's environment attaches it to (simulated), else the
// HCA port smp_port names. It carries mkeys, the M_Keys where the m_key
// hardening group sets one (newReadbackMKeys; nil: none).
func fabricReader(ctx context.Context, cfg config.FabricConfig, mkeys *readbackMKeys, workers int) (r *pkeyread.Reader, simulated bool, err error) {
	env, err := opensmEnvironment(cfg.OpenSM)
	if err != nil {
		return nil, false, err
	}
	port, err := smpPort(cfg, env)
	if err != nil {
		return nil, false, err
	}
	d, err := pkeyread.NewDialer(env, port)
	if err != nil {
		return nil, false, err
	}
	// On an HCA, one connection kept open between reads (closed at each
	// leadership term's end, reopened after an error): a change's read-back
	// and the second-SM look each opened the user MAD device anew. Not on the
	// simulator: it frees a client's place only when the client detaches,
	// never when its process dies, so a manager killed with kept connections
	// held places until the simulator refused every reader (CI's soak of
	// three managers with kill -9 saw it); the kernel closes a killed
	// process's device files.
	// On the simulator, the applier attaches the connection of a read after
	// a sweep while OpenSM sweeps (pkeyread.Ahead), and detaches it with the
	// apply: held for a sweep, not between sweeps.
	r = &pkeyread.Reader{Dialer: &pkeyread.Ahead{Dialer: d}, Workers: workers}
	if sim, _ := pkeyread.SimDialerFromEnv(env); sim.Socket == "" {
		r.Dialer = &pkeyread.Pool{Dialer: d, MaxIdle: 1}
	}
	if mkeys != nil {
		// MKeys is what the Reader sends; MKey, the key at the start, is
		// for the second-SM check, which sends its own SMPs.
		r.MKey, r.MKeys = mkeys.started, mkeys.MKeys
	}
	sim, _ := pkeyread.SimDialerFromEnv(env)
	return r, sim.Socket != "", nil
}

// CloseIdle closes the connection r's Pool kept, where a process is done
// reading: the simulator frees a client's place only when the client
// detaches, not when its process exits.
func CloseIdle(r *pkeyread.Reader) {
	if p, ok := r.Dialer.(*pkeyread.Pool); ok {
		_ = p.CloseIdle()
	}
}

// readbackMKeys gives the read-back proof and the second-SM look their
// M_Keys at each read, from the recorded keys: --rotate-keys records a new
// M_Key while the manager runs, and the OpenSM that a restart or a new
// leader starts with it moves the ports to it one sweep at a time. So the
// reads try the key recorded now, then the one recorded before it that this
// process saw (the ports' key until OpenSM moved them). The keys are never
// logged.
//
// An apply reads them once, beside its sweep (Ahead): the read-back and the
// look after the sweep's end each read them otherwise, two database round
// trips on the path of every change, on the engine's connections the jobs'
// transaction wants at that moment. The keys read beside the sweep are as
// good as any read after it: OpenSM runs with the key it was started with,
// which a rotation recorded meanwhile does not change, and a read that
// finds a port on another key leaves it unread, to be read again with the
// keys recorded then (the next read's, outside the apply).
type readbackMKeys struct {
	keys    opensm.KeySource
	started uint64 // the recorded key at the manager's start

	mu                sync.Mutex
	current, previous uint64
	ahead             *keysRead // Ahead's read, given to every MKeys until released; nil: none
}

// keysRead is one read of the keys, done once done is closed.
type keysRead struct {
	done chan struct{}
	keys []uint64
}

// newReadbackMKeys is the M_Keys of cfg's fabric where the m_key hardening
// group sets one, nil otherwise: M_Key protection level 2 and 3 refuse a
// Get without the M_Key. The keys are created now if none are recorded
// (the manager's start); every later read only reads them.
func newReadbackMKeys(ctx context.Context, cfg config.FabricConfig, keys opensm.KeySource) (*readbackMKeys, error) {
	if !cfg.OpenSM.Hardening.Has(opensm.GroupMKey) {
		return nil, nil
	}
	k, err := keys.Keys(ctx)
	if err != nil {
		return nil, err
	}
	return &readbackMKeys{keys: keys, started: k.MKey, current: k.MKey}, nil
}

// recordedKeySource is a KeySource that can read the keys without creating
// them (DatabaseKeys): a read, where Keys may write.
type recordedKeySource interface {
	RecordedKeys(ctx context.Context) (opensm.Keys, error)
}

// MKeys is the Reader's MKeys: the keys Ahead read while it holds them,
// else the ones recorded now.
func (k *readbackMKeys) MKeys(ctx context.Context) ([]uint64, error) {
	k.mu.Lock()
	a := k.ahead
	k.mu.Unlock()
	if a == nil {
		return k.read(ctx), nil
	}
	select {
	case <-a.done:
		return slices.Clone(a.keys), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Ahead starts a read of the keys that every MKeys gives until release,
// which waits for the read's end (nothing of it outlives the apply).
func (k *readbackMKeys) Ahead(ctx context.Context) (release func()) {
	a := &keysRead{done: make(chan struct{})}
	k.mu.Lock()
	k.ahead = a
	k.mu.Unlock()
	go func() {
		defer close(a.done)
		a.keys = k.read(ctx)
	}()
	return func() {
		<-a.done
		k.mu.Lock()
		if k.ahead == a {
			k.ahead = nil
		}
		k.mu.Unlock()
	}
}

// read reads the recorded keys. A database that cannot be read leaves the
// keys last read: the reads go on with them. The keys are read, never
// created: the manager's start created them before any read
// (newReadbackMKeys), and a write transaction at every read-back and
// second-SM look cost a change 2-5 ms on the server engines and took
// SQLite's one writer.
func (k *readbackMKeys) read(ctx context.Context) []uint64 {
	read := k.keys.Keys
	if r, ok := k.keys.(recordedKeySource); ok {
		read = r.RecordedKeys
	}
	recorded, err := read(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil && recorded.MKey != k.current {
		k.previous, k.current = k.current, recorded.MKey
	}
	if k.previous == 0 || k.previous == k.current {
		return []uint64{k.current}
	}
	return []uint64{k.current, k.previous}
}

// smpPort is the HCA port SMPs are sent from on real hardware: [opensm]
// smp_port, else the local port whose GUID is the one OpenSM runs on
// ([opensm_conf] guid), so that reads leave from OpenSM's own port. On the
// simulated fabric it is not needed ("").
func smpPort(cfg config.FabricConfig, opensmEnv []string) (string, error) {
	if cfg.OpenSM.SMPPort != "" {
		return cfg.OpenSM.SMPPort, nil
	}
	if sim, _ := pkeyread.SimDialerFromEnv(opensmEnv); sim.Socket != "" {
		return "", nil
	}
	guid, err := cfg.OpenSMGUID()
	if err != nil || guid == 0 {
		return "", err // none: UmadDialer says to set smp_port
	}
	port, err := pkeyread.UmadPortOfGUID(guid)
	if err != nil {
		return "", fmt.Errorf("[opensm] smp_port is empty and the port of [opensm_conf] guid %s: %w", guid, err)
	}
	return port, nil
}

// opensmEnvironment is the environment OpenSM runs with, as each driver
// builds it: the process driver's child inherits the manager's and adds
// env_file's lines; a container gets env_file's alone.
func opensmEnvironment(o config.OpenSM) ([]string, error) {
	var env []string
	if o.Driver == config.DriverProcess {
		env = os.Environ()
	}
	if o.EnvFile == "" {
		return env, nil
	}
	extra, err := opensm.ReadEnvFile(o.EnvFile)
	if err != nil {
		return nil, err
	}
	return append(env, extra...), nil // later entries win
}
