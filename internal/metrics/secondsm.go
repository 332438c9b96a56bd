package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// SecondSMs is what a scrape reads of a second subnet manager: the one the
// leader recorded (store.SecondSMs), read from the database so that every
// manager, leader or not, exports it.
type SecondSMs interface {
	SecondSMs(ctx context.Context) ([]store.SecondSM, error)
	// ForeignSMs are the SMs, MASTER by their SMInfo, that master no port.
	ForeignSMs(ctx context.Context) ([]store.SecondSM, error)
}

// SecondSM is a collector of afm_second_sm: 1 while the leader records a
// master subnet manager that is not its own OpenSM, labelled with that SM's
// port GUID, priority and state (at most one series: the leader records one),
// 0 with empty labels otherwise. Absent when the database cannot be read.
// And of afm_foreign_sm, likewise: 1 for each SM, MASTER by its own SMInfo,
// that masters no port (a tenant's SM the keys keep off the ports), which
// holds no job but is to be stopped.
// Each fabric registers its own, with its store view: the series carry the
// fabric.
type SecondSM struct {
	Fabric  *Fabric // the fabric's handle (Metrics.Fabric)
	DB      SecondSMs
	Timeout time.Duration // 0: 5 s
}

var specSecondSM = &gaugeSpec{"second_sm",
	"1 while a master subnet manager that is not the leader's OpenSM is recorded (its port GUID, priority and state), else 0.",
	[]string{"port_guid", "priority", "state"}}

var specForeignSM = &gaugeSpec{"foreign_sm",
	"1 for each subnet manager MASTER by its own SMInfo that masters no port (no job waits for it), else 0.",
	[]string{"port_guid", "priority", "state"}}

// Describe sends afm_second_sm's and afm_foreign_sm's descriptions.
func (c *SecondSM) Describe(ch chan<- *prometheus.Desc) {
	ch <- specSecondSM.desc(c.Fabric.Name())
	ch <- specForeignSM.desc(c.Fabric.Name())
}

// Collect reads the recorded second and foreign subnet managers.
func (c *SecondSM) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext(c.Timeout)
	defer cancel()
	sms, err := c.DB.SecondSMs(ctx)
	c.collect(ch, specSecondSM, "scrape_second_sm", sms, err)
	foreign, err := c.DB.ForeignSMs(ctx)
	c.collect(ch, specForeignSM, "scrape_foreign_sm", foreign, err)
}

// collect sends spec's series for sms, read by operation.
func (c *SecondSM) collect(ch chan<- prometheus.Metric, spec *gaugeSpec, operation string, sms []store.SecondSM, err error) {
	desc := spec.desc(c.Fabric.Name())
	if err != nil {
		c.Fabric.m.DatabaseError(operation)
		return
	}
	if len(sms) == 0 {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 0, "", "", "")
		return
	}
	for _, sm := range sms {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, 1,
			sm.PortGUID.String(), strconv.Itoa(sm.Priority), sm.State)
	}
}
