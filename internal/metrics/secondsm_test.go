package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

type fakeSecondSMs struct {
	sms, foreign []store.SecondSM
	down         bool
}

func (f fakeSecondSMs) ForeignSMs(context.Context) ([]store.SecondSM, error) {
	if f.down {
		return nil, errors.New("database down")
	}
	return f.foreign, nil
}

func (f fakeSecondSMs) SecondSMs(context.Context) ([]store.SecondSM, error) {
	if f.down {
		return nil, errors.New("database down")
	}
	return f.sms, nil
}

func TestSecondSMMetric(t *testing.T) {
	for _, tc := range []struct {
		name     string
		db       fakeSecondSMs
		want     map[string]float64 // afm_second_sm's series; nil: absent
		dbErrors float64
	}{
		{name: "none recorded", db: fakeSecondSMs{}, want: map[string]float64{"fabric=default,port_guid=,priority=,state=": 0}},
		{name: "one recorded", db: fakeSecondSMs{sms: []store.SecondSM{{PortGUID: 0x0002c90300a10001, Priority: 15, State: "MASTER"}}},
			want: map[string]float64{"fabric=default,port_guid=0x0002c90300a10001,priority=15,state=MASTER": 1}},
		{name: "database down", db: fakeSecondSMs{down: true}, dbErrors: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			m.Registry().MustRegister(&SecondSM{Fabric: m.Fabric(store.DefaultFabric), DB: tc.db})
			got := gathered(t, m)
			if len(got["afm_second_sm"]) != len(tc.want) {
				t.Fatalf("afm_second_sm = %v, want %v", got["afm_second_sm"], tc.want)
			}
			for labels, v := range tc.want {
				if g, ok := got["afm_second_sm"][labels]; !ok || g != v {
					t.Errorf("afm_second_sm{%s} = %v (present %v), want %v", labels, g, ok, v)
				}
			}
			// The error is counted during the scrape, which may gather the
			// counter first: the next scrape shows it (and perhaps its own).
			e := gathered(t, m)["afm_database_errors_total"]["operation=scrape_second_sm"]
			if e < tc.dbErrors || tc.dbErrors == 0 && e != 0 {
				t.Errorf("afm_database_errors_total{operation=scrape_second_sm} after two scrapes = %v, want %v or more (0 when none)", e, tc.dbErrors)
			}
		})
	}
}

// afm_foreign_sm names each SM that masters no port, beside afm_second_sm.
func TestForeignSMMetric(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   fakeSecondSMs
		want map[string]float64 // afm_foreign_sm's series; nil: absent
	}{
		{name: "none recorded", db: fakeSecondSMs{}, want: map[string]float64{"fabric=default,port_guid=,priority=,state=": 0}},
		{name: "two recorded", db: fakeSecondSMs{foreign: []store.SecondSM{{PortGUID: 0x0002c90300000301, Priority: 0, State: "MASTER"},
			{PortGUID: 0x0002c90300000501, Priority: 15, State: "MASTER"}}},
			want: map[string]float64{"fabric=default,port_guid=0x0002c90300000301,priority=0,state=MASTER": 1,
				"fabric=default,port_guid=0x0002c90300000501,priority=15,state=MASTER": 1}},
		{name: "database down", db: fakeSecondSMs{down: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			m.Registry().MustRegister(&SecondSM{Fabric: m.Fabric(store.DefaultFabric), DB: tc.db})
			got := gathered(t, m)["afm_foreign_sm"]
			if len(got) != len(tc.want) {
				t.Fatalf("afm_foreign_sm = %v, want %v", got, tc.want)
			}
			for labels, v := range tc.want {
				if g, ok := got[labels]; !ok || g != v {
					t.Errorf("afm_foreign_sm{%s} = %v (present %v), want %v", labels, g, ok, v)
				}
			}
		})
	}
}
