package verdict

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// failingAfter is a real store whose reads fail from the n-th on: the
// database lost in the middle of reading the evidence.
type failingAfter struct {
	*store.Store
	n     int
	reads int
}

var errLost = errors.New("database lost")

func (f *failingAfter) read() error {
	f.reads++
	if f.reads >= f.n {
		return errLost
	}
	return nil
}

func (f *failingAfter) ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	return f.Store.ExpectedSwitches(ctx)
}

func (f *failingAfter) EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	return f.Store.EnforcementErrors(ctx)
}

func (f *failingAfter) DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	return f.Store.DuplicateGUIDs(ctx)
}

func (f *failingAfter) LastAudit(ctx context.Context) (store.Audit, bool, error) {
	if err := f.read(); err != nil {
		return store.Audit{}, false, err
	}
	return f.Store.LastAudit(ctx)
}

func (f *failingAfter) SecondSMs(ctx context.Context) ([]store.SecondSM, error) {
	if err := f.read(); err != nil {
		return nil, err
	}
	return f.Store.SecondSMs(ctx)
}

// TestSourceFailsClosed: a database read that fails at any point of reading
// the evidence gives no verdict but the error (the gates stay closed for
// whoever asked: the applier holds, --status fails, the scrape leaves
// afm_gate_closed out); all reads passing give the verdict of what is
// recorded: a healthy fabric, open.
func TestSourceFailsClosed(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	if err := st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{switch1, switch2}); err != nil {
		t.Fatal(err)
	}
	const reads = 5 // switches, enforcement, duplicates, audit, second SM
	for n := 1; n <= reads+1; n++ {
		f := &failingAfter{Store: st, n: n}
		src := Source{Store: f, SubnetDump: filepath.Join("testdata", "two-switches.lst"), Audits: f, SecondSMs: f}
		reasons, err := src.Closed(t.Context())
		switch {
		case n <= reads && (!errors.Is(err, errLost) || reasons != nil):
			t.Errorf("read %d fails: reasons %v, error %v; want none and the error", n, reasons, err)
		case n > reads && (err != nil || len(reasons) != 0):
			t.Errorf("every read passes: reasons %v, error %v; want open", reasons, err)
		}
	}
}
