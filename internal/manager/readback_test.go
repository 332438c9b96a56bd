package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// recordedMKey is a KeySource with a fixed M_Key.
type recordedMKey uint64

func (k recordedMKey) Keys(context.Context) (opensm.Keys, error) {
	return opensm.Keys{MKey: uint64(k)}, nil
}

// TestNewReadback: verify = log reads nothing; verify = tables reads the
// simulator OpenSM's env_file names, with the M_Key when the m_key group is
// on, and refuses to start, naming the key, where no transport exists.
func TestNewReadback(t *testing.T) {
	dir := t.TempDir()
	simEnv := filepath.Join(dir, "sim.env")
	if err := os.WriteFile(simEnv, []byte("IBSIM_SOCKNAME=sim7\nSIM_HOST=SM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IBSIM_SOCKNAME", "") // the manager's own environment names no simulator
	for _, tc := range []struct {
		name    string
		edit    func(o *config.OpenSM)
		want    *pkeyread.Reader
		wantErr string
	}{
		{name: "log", edit: func(o *config.OpenSM) { o.Verify = config.VerifyLog; o.EnvFile = simEnv }},
		{name: "simulated", edit: func(o *config.OpenSM) { o.EnvFile = simEnv },
			want: &pkeyread.Reader{Dialer: pkeyread.SimDialer{Socket: "sim7", Node: "SM"}, Workers: readbackWorkers, MKey: 0x1234}},
		{name: "without m_key", edit: func(o *config.OpenSM) { o.EnvFile = simEnv; o.Hardening.Groups = nil },
			want: &pkeyread.Reader{Dialer: pkeyread.SimDialer{Socket: "sim7", Node: "SM"}, Workers: readbackWorkers}},
		{name: "no transport", edit: func(o *config.OpenSM) {}, wantErr: "[opensm] verify = tables: no transport for SMPs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.edit(&cfg.Fabrics[0].OpenSM)
			fc := cfg.FabricConfig(cfg.Fabrics[0])
			mkeys, err := newReadbackMKeys(t.Context(), fc, recordedMKey(0x1234))
			if err != nil {
				t.Fatal(err)
			}
			r, err := newReadback(t.Context(), fc, mkeys)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "verify = log") {
					t.Fatalf("newReadback: %v, %v; want an error saying %q and the way out", r, err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.want == nil && r != nil:
				t.Fatalf("verify = log: a reader %+v", r)
			case tc.want != nil && (r == nil || aheadOf(r.Dialer) != tc.want.Dialer || r.Workers != tc.want.Workers):
				// On the simulator, no Pool: a killed manager's kept
				// connections would hold the simulator's places. An Ahead
				// holds one for a sweep, closed with its apply.
				t.Fatalf("newReadback = %+v, want %+v behind a pkeyread.Ahead", r, tc.want)
			case tc.want != nil && tc.want.MKey == 0 && r.MKeys != nil:
				t.Fatal("a reader with M_Keys without the m_key group")
			case tc.want != nil && tc.want.MKey != 0:
				if r.MKeys == nil {
					t.Fatal("a reader without M_Keys with the m_key group")
				}
				if keys, err := r.MKeys(t.Context()); err != nil || !slices.Equal(keys, []uint64{tc.want.MKey}) {
					t.Fatalf("the reader's M_Keys = %#x, %v; want %#x", keys, err, tc.want.MKey)
				}
			}
		})
	}
}

// TestSMPPort: the port SMPs leave from is smp_port, else the port of
// OpenSM's guid; on the simulated fabric none is needed.
func TestSMPPort(t *testing.T) {
	sim := []string{"IBSIM_SOCKNAME=sim7", "SIM_HOST=SM"}
	for _, tc := range []struct {
		name    string
		smpPort string
		guid    string
		env     []string
		want    string
		wantErr string
	}{
		{name: "smp_port", smpPort: "mlx5_1:2", guid: "0x0002c90300000001", want: "mlx5_1:2"},
		{name: "simulated", guid: "0x0002c90300000001", env: sim, want: ""},
		{name: "no guid: UmadDialer asks for smp_port", want: ""},
		// No HCA here has that GUID: the error names both keys.
		{name: "guid of no local port", guid: "0x0002c90300000001", wantErr: "smp_port is empty and the port of [opensm_conf] guid 0x0002c90300000001"},
		{name: "bad guid", guid: "nonsense", wantErr: "[opensm_conf] guid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Fabrics[0].OpenSM.SMPPort = tc.smpPort
			if tc.guid != "" {
				cfg.Fabrics[0].OpenSMConf = []config.KeyValue{{Key: "guid", Value: tc.guid}}
			}
			got, err := smpPort(cfg.FabricConfig(cfg.Fabrics[0]), tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("smpPort = %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("smpPort = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// rotatingKeys is a KeySource whose M_Key a test changes, as --rotate-keys
// does while a manager runs; err fails the next calls.
type rotatingKeys struct {
	mkey uint64
	err  error
}

func (k *rotatingKeys) Keys(context.Context) (opensm.Keys, error) {
	return opensm.Keys{MKey: k.mkey}, k.err
}

// TestReadbackMKeysFollowRotation: the read-back proof's M_Keys are the
// recorded one at each read; after a rotation, the new key and then the old
// one (ports keep it until OpenSM moves them); a database that cannot be
// read leaves the keys last read.
func TestReadbackMKeysFollowRotation(t *testing.T) {
	src := &rotatingKeys{mkey: 0x1111}
	k := &readbackMKeys{keys: src, current: 0x1111}
	for _, step := range []struct {
		name string
		edit func()
		want []uint64
	}{
		{"before a rotation", func() {}, []uint64{0x1111}},
		{"rotated", func() { src.mkey = 0x2222 }, []uint64{0x2222, 0x1111}},
		{"database away", func() { src.err = errors.New("away") }, []uint64{0x2222, 0x1111}},
		{"rotated again", func() { src.mkey, src.err = 0x3333, nil }, []uint64{0x3333, 0x2222}},
	} {
		step.edit()
		if got, err := k.MKeys(t.Context()); err != nil || !slices.Equal(got, step.want) {
			t.Errorf("%s: M_Keys = %#x, %v; want %#x", step.name, got, err, step.want)
		}
	}
}

// creations counts the calls that may create secrets (a write transaction).
type creations struct {
	opensm.SecretStore
	n int
}

func (c *creations) GetOrCreateSecrets(ctx context.Context, generate func() (map[string]string, error)) (map[string]string, error) {
	c.n++
	return c.SecretStore.GetOrCreateSecrets(ctx, generate)
}

// TestReadbackMKeysOnlyRead: once the manager's start created the keys,
// the M_Key of every read-back and second-SM look is read, never created
// (Keys is a write transaction, at every apply twice), and still follows a
// rotation recorded meanwhile.
func TestReadbackMKeysOnlyRead(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	src := &creations{SecretStore: st}
	created, err := opensm.DatabaseKeys{Store: src}.Keys(t.Context()) // the manager's start
	if err != nil {
		t.Fatal(err)
	}
	k := &readbackMKeys{keys: opensm.DatabaseKeys{Store: src}, current: created.MKey}
	if got, err := k.MKeys(t.Context()); err != nil || !slices.Equal(got, []uint64{created.MKey}) {
		t.Fatalf("MKeys = %x, %v; want the created key", got, err)
	}
	const rotated = 0x0123456789abcdef
	if _, err := st.SetSecrets(t.Context(), map[string]string{opensm.SecretMKey: opensm.FormatKey(rotated)}, true); err != nil {
		t.Fatal(err)
	}
	if got, err := k.MKeys(t.Context()); err != nil || !slices.Equal(got, []uint64{rotated, created.MKey}) {
		t.Fatalf("MKeys after a rotation = %x, %v; want the new key, then the old one", got, err)
	}
	if src.n != 1 {
		t.Errorf("the reads' M_Keys opened %d creating transactions, want none after the start's", src.n-1)
	}
}

// BenchmarkReadbackMKeys is the M_Key read of one read-back or second-SM
// look on each engine (each apply has two): recorded, as the reads take it
// now, and created, the write transaction they opened before.
func BenchmarkReadbackMKeys(b *testing.B) {
	for _, engine := range []string{config.EngineSQLite, config.EnginePostgres, config.EngineMySQL} {
		st := storetest.Open(b, engine)
		keys := opensm.DatabaseKeys{Store: st}
		if _, err := keys.Keys(b.Context()); err != nil {
			b.Fatal(err)
		}
		for _, read := range []struct {
			name string
			keys func(context.Context) (opensm.Keys, error)
		}{{"recorded", keys.RecordedKeys}, {"created", keys.Keys}} {
			b.Run(engine+"/"+read.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := read.keys(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// aheadOf is the Dialer an Ahead dials with; nil for any other Dialer.
func aheadOf(d pkeyread.Dialer) pkeyread.Dialer {
	if a, ok := d.(*pkeyread.Ahead); ok {
		return a.Dialer
	}
	return nil
}

// countedKeys is a KeySource that counts its reads; while gate is set, a
// read waits for it (or its context) before it answers.
type countedKeys struct {
	rotatingKeys
	reads atomic.Int32
	gate  chan struct{}
}

func (k *countedKeys) Keys(ctx context.Context) (opensm.Keys, error) {
	k.reads.Add(1)
	if k.gate != nil {
		select {
		case <-k.gate:
		case <-ctx.Done():
			return opensm.Keys{}, ctx.Err()
		}
	}
	return k.rotatingKeys.Keys(ctx)
}

// TestReadbackMKeysAhead: an apply reads the keys once, beside its sweep;
// the read-back and the second-SM look after it are given what that read
// found, a rotation recorded meanwhile included (OpenSM runs with the key it
// was started with), and the first read after the apply reads them again.
func TestReadbackMKeysAhead(t *testing.T) {
	src := &countedKeys{rotatingKeys: rotatingKeys{mkey: 0x1111}}
	k := &readbackMKeys{keys: src, current: 0x1111}
	release := k.Ahead(t.Context())
	src.mkey = 0x2222 // rotated once the read beside the sweep is under way (it may have read either)
	first, _ := k.MKeys(t.Context())
	for _, reader := range []string{"the read-back", "the second-SM look"} {
		if got, err := k.MKeys(t.Context()); err != nil || !slices.Equal(got, first) {
			t.Errorf("%s: M_Keys = %#x, %v; want %#x, the apply's read", reader, got, err, first)
		}
	}
	release()
	if n := src.reads.Load(); n != 1 {
		t.Errorf("the apply read the keys %d times; want once", n)
	}
	if got, err := k.MKeys(t.Context()); err != nil || !slices.Equal(got, []uint64{0x2222, 0x1111}) {
		t.Errorf("after the apply: M_Keys = %#x, %v; want the rotated key, then the old one", got, err)
	}
	if n := src.reads.Load(); n != 2 {
		t.Errorf("the read after the apply read the keys %d times in all; want 2", n)
	}
}

// TestReadbackMKeysAheadWindows opens the windows of a read beside the
// sweep that has not answered yet: a reader whose context ends meanwhile
// gets its context's error, not keys; release waits for the read's end
// (nothing of an apply outlives it); a database that could not be read
// leaves the keys last read; an apply's context that ends leaves them too.
func TestReadbackMKeysAheadWindows(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(src *countedKeys, cancelApply context.CancelFunc)
		want []uint64
	}{
		{"answered", func(src *countedKeys, _ context.CancelFunc) { src.mkey = 0x2222; close(src.gate) }, []uint64{0x2222, 0x1111}},
		{"database away", func(src *countedKeys, _ context.CancelFunc) { src.err = errors.New("away"); close(src.gate) }, []uint64{0x1111}},
		{"apply cancelled", func(_ *countedKeys, cancel context.CancelFunc) { cancel() }, []uint64{0x1111}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &countedKeys{rotatingKeys: rotatingKeys{mkey: 0x1111}, gate: make(chan struct{})}
			k := &readbackMKeys{keys: src, current: 0x1111}
			applyCtx, cancelApply := context.WithCancel(t.Context())
			defer cancelApply()
			release := k.Ahead(applyCtx)
			readerCtx, cancelReader := context.WithCancel(t.Context())
			cancelReader()
			if got, err := k.MKeys(readerCtx); !errors.Is(err, context.Canceled) {
				t.Fatalf("a reader whose context ended: M_Keys = %#x, %v; want its context's error", got, err)
			}
			released := make(chan struct{})
			go func() { release(); close(released) }()
			select {
			case <-released:
				t.Fatal("release returned before the read beside the sweep ended")
			case <-time.After(20 * time.Millisecond):
			}
			tc.end(src, cancelApply)
			<-released
			k.mu.Lock()
			got, ahead := []uint64{k.current, k.previous}, k.ahead
			k.mu.Unlock()
			if ahead != nil || !slices.Equal(slices.DeleteFunc(got, func(key uint64) bool { return key == 0 }), tc.want) {
				t.Errorf("after the apply: the keys %#x (a read ahead held: %v); want %#x, none held", got, ahead != nil, tc.want)
			}
		})
	}
}
