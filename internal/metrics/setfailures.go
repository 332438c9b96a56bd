package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// SetFailureStore is what a scrape reads of the host ports that did not
// take OpenSM's Sets: the ones the leader recorded (store.SetFailures), read
// from the database so that every manager, leader or not, exports them, and
// a new leader's scrapes name them as the previous one's did.
type SetFailureStore interface {
	SetFailures(ctx context.Context) ([]store.SetFailure, error)
}

// SetFailures is a collector of afm_port_sets_failed: 1 for each host port
// the leader recorded as not taking OpenSM's Sets (a sweep's pkey error
// lines named it, or its table read after a sweep with errors did not show
// the change or did not answer): only that port's jobs wait or fail. No
// series while none is recorded, and none when the database cannot be read
// (afm_database_errors_total counts it). Each fabric registers its own.
type SetFailures struct {
	Fabric  *Fabric // the fabric's handle (Metrics.Fabric)
	DB      SetFailureStore
	Timeout time.Duration // 0: 5 s
}

var specSetFailures = &gaugeSpec{"port_sets_failed",
	"1 for each host port that did not take OpenSM's Sets in the sweeps the leader watched (a pkey error named it, or its table did not show the change after a sweep with errors); only its jobs wait or fail.",
	[]string{"port"}}

// Describe sends afm_port_sets_failed's description.
func (c *SetFailures) Describe(ch chan<- *prometheus.Desc) {
	ch <- specSetFailures.desc(c.Fabric.Name())
}

// Collect reads the recorded ports.
func (c *SetFailures) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext(c.Timeout)
	defer cancel()
	ports, err := c.DB.SetFailures(ctx)
	if err != nil {
		c.Fabric.m.DatabaseError("scrape_set_failures")
		return
	}
	desc := specSetFailures.desc(c.Fabric.Name())
	for _, p := range ports {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 1, p.Port.String())
	}
}
