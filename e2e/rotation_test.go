package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// OpenSM's log rotated in the middle of a burst of changes, each of the three
// ways it is done: logrotate's rename then SIGUSR1 (OpenSM reopens its log),
// logrotate's copytruncate, and OpenSM's own log_max_size (it truncates the
// file in place; at log_flags 0xd7, everything but DEBUG and FRAMES, which the
// manager refuses, a sweep here logs ~225 KB, so a 1 MB limit truncates every
// few sweeps). Every job completes, and none before its pkey
// is in its port's table.
func TestLogRotationDuringBurst(t *testing.T) {
	rotations := []struct {
		name   string
		opensm []string                         // [opensm_conf] lines
		rotate func(m *manager, logFile string) // nil: OpenSM rotates by itself
	}{
		{"rename and SIGUSR1", nil, func(m *manager, logFile string) {
			if err := os.Rename(logFile, logFile+".1"); err != nil {
				m.t.Fatal(err)
			}
			if err := syscall.Kill(m.openSMPID(), syscall.SIGUSR1); err != nil {
				m.t.Fatal(err)
			}
		}},
		{"copytruncate", nil, func(m *manager, logFile string) {
			copyFile(m.t, logFile, logFile+".1")
			if err := os.Truncate(logFile, 0); err != nil {
				m.t.Fatal(err)
			}
		}},
		{"log_max_size", []string{"log_max_size = 1", "log_flags = 0xd7"}, nil},
	}
	const hosts = 10
	for _, rot := range rotations {
		t.Run(rot.name, func(t *testing.T) {
			m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: hosts},
				settings{OpenSMConf: rot.opensm})
			m.confirmSwitches()
			logFile := filepath.Join(m.dir, "opensm", "opensm.log")
			m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

			type change struct {
				job  string
				host fabric.GUID
			}
			var burst []change
			for i := 1; i <= hosts; i++ {
				h := m.fabric.Host(fmt.Sprintf("H%d", i)).PortGUID
				id := fmt.Sprintf("port-%d", i)
				burst = append(burst, change{m.accept("POST", "/cloudx/Port", portBody(id, netID, vendorClientID(h))), h})
				if i%4 == 0 && rot.rotate != nil { // twice, while a change is being applied
					job := burst[len(burst)-1].job
					waitFor(t, "job "+job+" applied", func() bool { return m.job(job).Status != "Pending" })
					rot.rotate(m, logFile)
				}
			}
			for _, c := range burst {
				m.waitCompleted(c.job, func() {
					if got := m.pkeys(c.host); !slices.Contains(got, 0x8065) {
						t.Fatalf("job %s read Completed while %s's pkey table is %s, without 0x8065", c.job, c.host, hex(got))
					}
				})
			}
			if rot.rotate == nil {
				if _, err := os.Stat(logFile); err != nil {
					t.Fatal(err)
				}
				m.wantLogLine("log truncated or replaced") // the limit was reached during the test
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}
