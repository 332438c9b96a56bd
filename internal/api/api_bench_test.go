package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The API's two hot paths, called in-process (no sockets) on each engine, so
// that a profile shows the manager's own cost per request:
//
//	go test -run '^$' -bench . -cpuprofile cpu.out ./internal/api
//	go tool pprof -top api.test cpu.out
//
// cmd/afm-bench measures the same over HTTP against a running manager.

// benchServer is an API on a fresh database with one VLAN network. Its
// changes are checked against networking-mlnx's quota, read from the
// database as the manager wires it, with bounds no benchmark reaches.
func benchServer(b *testing.B, engine string) http.Handler {
	b.Helper()
	st := storetest.Open(b, engine)
	quota := Quota{MaxStoredBytes: 1 << 40, MaxJobsPerMinute: 1 << 30, Window: 7 * 24 * time.Hour, Usage: st}
	h := New(Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, Quota: quota}, st, slog.New(slog.DiscardHandler))
	body := `{"id": "` + networkID + `", "provider:network_type": "vlan", "provider:physical_network": "ibnet", ` +
		`"provider:segmentation_id": 101}`
	if rec := serveBench(h, http.MethodPost, "/ufmRestV3/cloudx/Network", body); rec.Code != http.StatusAccepted {
		b.Fatalf("create network: %d %s", rec.Code, rec.Body)
	}
	return h
}

func serveBench(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Basic "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// benchPortBody is a baremetal port with GUID and id derived from n.
func benchPortBody(n uint64) string {
	guid := 0x0002c90400000000 + n
	var clientID strings.Builder
	clientID.WriteString("ff:00:00:00:00:00:02:00:00:02:c9:00")
	for shift := 56; shift >= 0; shift -= 8 {
		fmt.Fprintf(&clientID, ":%02x", byte(guid>>shift))
	}
	return fmt.Sprintf(`{"id": "8a4f2c6e-1d3b-4e5f-9a7c-%012x", "network_id": %q, "binding:host_id": "node-%d", `+
		`"binding:vnic_type": "baremetal", "extra_dhcp_opts": [{"opt_name": "client-id", "opt_value": %q}]}`,
		n, networkID, n, clientID.String())
}

// BenchmarkPostPort records new ports from one client, then from 16 at once
// (afm-bench's load, where changes commit in groups): validation, the
// recording transaction and the 202.
func BenchmarkPostPort(b *testing.B) {
	for _, engine := range storetest.Engines {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", engine, clients), func(b *testing.B) {
				h := benchServer(b, engine)
				var next atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				defer reportCPU(b, processCPU())
				post := func() bool {
					rec := serveBench(h, http.MethodPost, "/ufmRestV3/cloudx/Port", benchPortBody(next.Add(1)))
					if rec.Code != http.StatusAccepted {
						b.Errorf("POST Port: %d %s", rec.Code, rec.Body)
						return false
					}
					return true
				}
				if clients == 1 {
					for range b.N {
						if !post() {
							return
						}
					}
					return
				}
				b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() && post() {
					}
				})
			})
		}
	}
}

// processCPU is the CPU time the process has used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation since from
// (processCPU): every goroutine's, the handler's and, on SQLite, the
// database's. On a machine that other work shares, it varies less than the
// time per operation, which counts the waits for a processor too; on a
// database server's engine it leaves out the server's work.
func reportCPU(b *testing.B, from time.Duration) {
	b.ReportMetric(float64(processCPU()-from)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// BenchmarkGetJob polls existing jobs from parallel clients, as
// networking-mlnx's sync loops do.
func BenchmarkGetJob(b *testing.B) {
	const jobs = 200
	for _, engine := range storetest.Engines {
		b.Run(engine, func(b *testing.B) {
			h := benchServer(b, engine)
			paths := make([]string, jobs)
			for n := range uint64(jobs) {
				rec := serveBench(h, http.MethodPost, "/ufmRestV3/cloudx/Port", benchPortBody(n+1))
				if rec.Code != http.StatusAccepted {
					b.Fatalf("POST Port: %d %s", rec.Code, rec.Body)
				}
				paths[n] = rec.Header().Get("Location")
			}
			var next atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					path := paths[next.Add(1)%jobs]
					if rec := serveBench(h, http.MethodGet, path, ""); rec.Code != http.StatusOK {
						b.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
						return
					}
				}
			})
		})
	}
}
