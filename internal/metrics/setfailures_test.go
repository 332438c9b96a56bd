package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

type downSetFailures struct{}

func (downSetFailures) SetFailures(context.Context) ([]store.SetFailure, error) {
	return nil, errors.New("database down")
}

// TestSetFailuresMetric: afm_port_sets_failed names each port the leader
// recorded, read from a real store, and only those; a term that recorded
// none leaves no series; a database that cannot be read leaves none and
// counts an error.
func TestSetFailuresMetric(t *testing.T) {
	const h2, h4 = "0x0002c90300000201", "0x0002c90300000401"
	st := storetest.Open(t, config.EngineSQLite)
	term, err := st.NewTerm(t.Context(), "leader")
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().UTC()
	for _, tc := range []struct {
		name     string
		recorded []store.SetFailure
		want     []string // the ports named
	}{
		{"none recorded", nil, nil},
		{"two recorded", []store.SetFailure{{Port: 0x0002c90300000201, Since: since}, {Port: 0x0002c90300000401, Since: since}},
			[]string{h2, h4}},
		{"one left", []store.SetFailure{{Port: 0x0002c90300000401, Since: since}}, []string{h4}},
		{"cleared", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.RecordSetFailures(t.Context(), term, tc.recorded); err != nil {
				t.Fatal(err)
			}
			m := New()
			m.Registry().MustRegister(&SetFailures{Fabric: m.Fabric(store.DefaultFabric), DB: st})
			got := gathered(t, m)["afm_port_sets_failed"]
			if len(got) != len(tc.want) {
				t.Fatalf("afm_port_sets_failed = %v, want the ports %v", got, tc.want)
			}
			for _, p := range tc.want {
				if v, ok := got["fabric=default,port="+p]; !ok || v != 1 {
					t.Errorf("afm_port_sets_failed{port=%s} = %v (present %v), want 1", p, v, ok)
				}
			}
		})
	}
	t.Run("database down", func(t *testing.T) {
		m := New()
		m.Registry().MustRegister(&SetFailures{Fabric: m.Fabric(store.DefaultFabric), DB: downSetFailures{}})
		if got := gathered(t, m)["afm_port_sets_failed"]; len(got) != 0 {
			t.Errorf("afm_port_sets_failed with the database down = %v, want no series", got)
		}
		if e := gathered(t, m)["afm_database_errors_total"]["operation=scrape_set_failures"]; e < 1 {
			t.Errorf("afm_database_errors_total{operation=scrape_set_failures} = %v, want 1 or more", e)
		}
	})
}
