package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// --status with [ha] ha = true shows the lease: its current holder (none once
// it expired), expiry, term, the previous holder, a freeze with the manager to
// check, and an --unfreeze pending until the leader takes it.
func TestStatusShowsTheLeaseAndUnfreeze(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewDatabase(t, engine)
			st := storetest.OpenDatabase(t, db)
			conf := writeConf(t, db.URL, t.TempDir())
			b, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(conf, append(b, "\n[ha]\nha = true\nlease_timeout = 2\n"...), 0o600); err != nil {
				t.Fatal(err)
			}
			leases, err := st.Leases()
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()

			// Long enough for --status to start and read it on a busy machine.
			if _, won, err := leases.TakeLease(ctx, "host-a pid 1", 3*time.Second); err != nil || !won {
				t.Fatalf("take = %v, %v", won, err)
			}
			s := statusJSON(t, conf)
			if s.Lease == nil || s.Lease.Holder != "host-a pid 1" || s.Lease.ExpiresAt == nil || s.Lease.ExpiresIn == nil ||
				*s.Lease.ExpiresIn <= 0 || s.Lease.Freeze != "" {
				t.Fatalf("lease while held = %+v", s.Lease)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				l, err := leases.ReadLease(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !l.Held() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the lease is still held after 30 s: %+v", l)
				}
			}
			s = statusJSON(t, conf)
			if s.Lease.Holder != "" || s.Lease.LastHolder != "host-a pid 1" || *s.Lease.ExpiresIn >= 0 ||
				!strings.Contains(strings.Join(s.NotCompleting, "|"), "no manager holds the lease") {
				t.Fatalf("lease once expired = %+v, not completing %q; want no holder", s.Lease, s.NotCompleting)
			}
			taken, won, err := leases.TakeLease(ctx, "host-b pid 2", time.Minute)
			if err != nil || !won {
				t.Fatalf("take = %v, %v", won, err)
			}
			if _, err := leases.SetFreeze(ctx, taken.Term, "Frozen: check host-a pid 1"); err != nil {
				t.Fatal(err)
			}
			s = statusJSON(t, conf)
			if s.Lease.Holder != "host-b pid 2" || s.Lease.Term != taken.Term || s.Lease.PreviousHolder != "host-a pid 1" ||
				!s.Lease.PreviousExpired || s.Lease.Check != "host-a pid 1" || s.Lease.UnfreezePending {
				t.Fatalf("lease when frozen = %+v", s.Lease)
			}
			code, out, errOut := runCommand(t, "--config-file", conf, "--status")
			for _, want := range []string{"held by host-b pid 2, term", "host-a pid 1, expired instead of being released",
				"FROZEN: check host-a pid 1", "unfreeze:", "not requested"} {
				if code != status.ExitJobsHeld || !strings.Contains(out, want) {
					t.Errorf("--status: exit %d, does not say %q:\n%s%s", code, want, out, errOut)
				}
			}
			code, out, errOut = runCommand(t, "--config-file", conf, "--unfreeze")
			if code != 0 || !strings.Contains(out, "unfreeze requested") {
				t.Fatalf("--unfreeze: exit %d: %s%s", code, out, errOut)
			}
			if s = statusJSON(t, conf); !s.Lease.UnfreezePending || s.Lease.Freeze == "" {
				t.Errorf("after --unfreeze = %+v; want the freeze with the unfreeze pending", s.Lease)
			}
			if _, out, _ = runCommand(t, "--config-file", conf, "--status"); !strings.Contains(out, "pending") {
				t.Errorf("--status does not show the pending unfreeze:\n%s", out)
			}
			if lifted, err := leases.LiftFreeze(ctx, taken.Term); err != nil || !lifted {
				t.Fatalf("lift = %v, %v", lifted, err)
			}
			if s = statusJSON(t, conf); s.Lease.Freeze != "" || s.Lease.UnfreezePending {
				t.Errorf("after the leader lifted it = %+v", s.Lease)
			}
			if code, out, _ = runCommand(t, "--config-file", conf, "--unfreeze"); code != 0 || !strings.Contains(out, "not frozen") {
				t.Errorf("--unfreeze without a freeze: exit %d: %s", code, out)
			}
		})
	}
}
