package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// fabricsResult: (10) one manager, two fabrics. A change on the second
// fabric, timed alone and while a burst of ports on the first is being
// applied: what the first fabric's load costs the other's latency (each
// fabric has its own applier, revision and OpenSM).
type fabricsResult struct {
	ports  int
	quiet  latencies     // the second fabric's change alone, POST → Completed
	during latencies     // the same, sent while the burst's jobs are open
	burst  time.Duration // the burst: first POST → every job Completed
}

// The second fabric of the rig: its name, physnet and network.
const (
	benchFabric2  = "storage"
	benchPhysnet2 = "storage"
	benchNetwork2 = "3b9d6a52-7c1e-4f0a-9e2d-00000000b002"
)

// fabricsSamples is how many changes of the second fabric are timed, alone
// and during the burst each.
const fabricsSamples = 5

// measureFabrics starts a rig of two fabrics (4 hosts each), times a change
// on the second alone, then sends the burst of ports on the first and times
// the second fabric's changes sent meanwhile.
func measureFabrics(ctx context.Context, engine, binary, dir string, ports, clients int, log *slog.Logger) (fabricsResult, error) {
	res := fabricsResult{ports: ports}
	r, err := startRigWith(ctx, engine, binary, dir, fabricsim.Options{Hosts: 4}, verifyLog, secondFabric, log)
	if err != nil {
		return res, err
	}
	defer r.stop(log)
	if err := fabricsim.ConfirmSwitches(ctx, binary, filepath.Join(dir, "afm.conf"), filepath.Join(dir, "opensm-storage"),
		"--fabric", benchFabric2); err != nil {
		return res, err
	}
	job, err := r.api.accept(ctx, "POST", "/"+apiDomain+"/Network", networkBody(benchNetwork2, benchPhysnet2, 102))
	if err != nil {
		return res, err
	}
	if _, err := r.api.waitCompleted(ctx, job, 20*time.Millisecond); err != nil {
		return res, fmt.Errorf("the second fabric's network: %w (manager log: %s)", err, r.logPath)
	}
	second := newPortSource(benchNetwork2)
	second.next.Store(1 << 20) // GUIDs of their own: a GUID is unique per fabric, not across them
	for range fabricsSamples {
		d, err := timePortOf(ctx, r, second)
		if err != nil {
			return res, err
		}
		res.quiet = append(res.quiet, d)
	}

	burstDone := make(chan error, 1)
	start, before := time.Now(), r.api.jobCount()
	go func() {
		b, err := measureBatch(ctx, r, ports, clients)
		res.burst = b.allCompleted
		burstDone <- err
	}()
	// The burst's POSTs spread over a second: the second fabric's changes go
	// in once a fifth of them was answered, while its jobs are open.
	for r.api.jobCount() < before+max(ports/5, 1) && len(burstDone) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	for range fabricsSamples {
		d, err := timePortOf(ctx, r, second)
		if err != nil {
			return res, err
		}
		res.during = append(res.during, d)
	}
	if err := <-burstDone; err != nil {
		return res, fmt.Errorf("the burst on the first fabric: %w", err)
	}
	log.Info("two fabrics", "burst", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// secondFabric starts the rig's second simulated fabric and configures it as
// [fabric:storage] beside the default fabric's physnet ibnet.
func secondFabric(ctx context.Context, r *rig) (moreConf, error) {
	f, err := fabricsim.Start(ctx, filepath.Join(r.dir, "fabric2"), fabricsim.Options{Hosts: 4})
	if err != nil {
		return moreConf{}, fmt.Errorf("start the second simulated fabric: %w", err)
	}
	r.storage = f
	return moreConf{
		api: []string{"physical_networks = ibnet"},
		sections: []testenv.Section{
			{Name: "fabric:" + benchFabric2, Lines: []string{"physical_networks = " + benchPhysnet2,
				"config_dir = " + filepath.Join(r.dir, "opensm-storage"), "env_file = " + f.EnvFile(), "verify = log"}},
			{Name: "fabric:" + benchFabric2 + ":opensm_conf", Lines: []string{"guid = " + f.SMGUID.String()}},
		},
	}, nil
}

// timePortOf is timeChange for a port of src's network.
func timePortOf(ctx context.Context, r *rig, src *portSource) (time.Duration, error) {
	start := time.Now()
	job, err := r.api.postPort(ctx, src.port())
	if err != nil {
		return 0, err
	}
	done, err := r.api.waitCompleted(ctx, job, pollEvery)
	if err != nil {
		return 0, err
	}
	return done.Sub(start), nil
}

// networkBody is a VLAN network on physnet.
func networkBody(id, physnet string, vlan int) []byte {
	return fmt.Appendf(nil, `{"id": %q, "name": "bench", "provider:network_type": "vlan", `+
		`"provider:physical_network": %q, "provider:segmentation_id": %d}`, id, physnet, vlan)
}

// fabricsRows are (10)'s.
func fabricsRows(add row, o options) {
	add(fmt.Sprintf("**10. two fabrics**: a port on fabric 2, POST → Completed, median / max of %d, alone", fabricsSamples), "",
		func(r engineResult) string {
			return ms(r.fabrics.quiet.median()) + " / " + ms(r.fabrics.quiet.quantile(1))
		})
	add(fmt.Sprintf("the same, while a burst of %d ports on fabric 1 is applied (a benchmark: no target)", o.ports), "",
		func(r engineResult) string {
			return ms(r.fabrics.during.median()) + " / " + ms(r.fabrics.during.quantile(1))
		})
	add("the burst on fabric 1: first POST → all Completed", "", func(r engineResult) string { return ms(r.fabrics.burst) })
}
