package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// fakeDB is a database for the collector's logic; the real engines are read by
// the end-to-end suite's scrapes. down makes every read fail, as a stopped
// server does.
type fakeDB struct {
	down   bool
	jobs   map[string]int64
	oldest map[string]time.Time
}

var errDown = errors.New("connection refused")

func (f *fakeDB) Revision(context.Context) (int64, error) {
	if f.down {
		return 0, errDown
	}
	return 7, nil
}

func (f *fakeDB) CountJobsByStatus(context.Context) (map[string]int64, error) {
	if f.down {
		return nil, errDown
	}
	return f.jobs, nil
}

func (f *fakeDB) Leadership(context.Context) (store.Leadership, error) {
	if f.down {
		return store.Leadership{}, errDown
	}
	hb := time.Unix(1700000000, 0)
	return store.Leadership{Term: 3, Holder: "h pid 1", Heartbeat: &hb}, nil
}

func (f *fakeDB) EnforcementErrors(context.Context) ([]store.EnforcementError, error) {
	if f.down {
		return nil, errDown
	}
	return []store.EnforcementError{{}, {}}, nil
}

func (f *fakeDB) OldestOpenJobs(context.Context) (map[string]time.Time, error) {
	if f.down {
		return nil, errDown
	}
	return f.oldest, nil
}

type fakeGates []applier.GateReason

func (g fakeGates) Closed(context.Context) ([]applier.GateReason, error) { return g, nil }

type fakeSM struct{ running bool }

func (f fakeSM) Running() bool { return f.running }
func (f fakeSM) Restarts() int { return 4 }

// gathered is a scrape, as name -> label set ("k=v,k=v") -> value.
func gathered(t *testing.T, m *Metrics) map[string]map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range families {
		out[f.GetName()] = map[string]float64{}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[f.GetName()][strings.Join(labels, ",")] = value(s)
		}
	}
	return out
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

func TestStateOnTheLeader(t *testing.T) {
	m := New()
	f := m.Fabric(store.DefaultFabric)
	db := &fakeDB{jobs: map[string]int64{store.StatusPending: 2, store.StatusCompleted: 5},
		oldest: map[string]time.Time{store.StatusPending: time.Now().Add(-90 * time.Second)}}
	m.Registry().MustRegister(&State{Fabric: f, DB: db, SM: fakeSM{running: true},
		Gates: fakeGates{{Kind: applier.GateNoExpectedSwitches, Text: applier.NoExpectedSwitches},
			{Kind: applier.GateSwitchMissing, Text: "expected switch 0x2 (S2) is missing from OpenSM's last sweep"},
			{Kind: applier.GateDuplicateGUID, Text: "OpenSM found a GUID twice: node GUID 0x0002c90300000100"}},
		Ready: func(context.Context) bool { return true }})
	f.Leading(3)
	f.ApplyFinished("applied", 2*time.Second)
	f.Applied(6, 2, map[string]time.Duration{PhaseRender: time.Millisecond, PhaseSweep: time.Second})
	m.HTTPRequest("POST", "Port", 202, time.Millisecond)
	m.HTTPRequest("BREW", "unmatched", 400, time.Millisecond)

	got := gathered(t, m)
	const def = "fabric=default"
	want := map[string]map[string]float64{
		"afm_leader":                             {def: 1},
		"afm_ready":                              {def: 1},
		"afm_database_up":                        {def: 1},
		"afm_revision_recorded":                  {def: 7},
		"afm_revision_applied":                   {def: 6},
		"afm_last_apply_failed":                  {def: 0},
		"afm_leader_term":                        {def: 3},
		"afm_leader_heartbeat_timestamp_seconds": {def: 1700000000},
		"afm_enforcement_errors":                 {def: 2},
		"afm_gates_closed":                       {def: 3},
		"afm_opensm_up":                          {def: 1},
		"afm_opensm_restarts_total":              {def: 4},
		"afm_jobs": {def + ",status=Completed": 5, def + ",status=Failed": 0, def + ",status=Pending": 2,
			def + ",status=Running": 0},
		"afm_gate_closed": {
			def + ",gate=no_expected_switches,reason=" + applier.NoExpectedSwitches:                          1,
			def + ",gate=switch_missing,reason=expected switch 0x2 (S2) is missing from OpenSM's last sweep": 1,
			def + ",gate=duplicate_guid,reason=OpenSM found a GUID twice: node GUID 0x0002c90300000100":      1,
		},
		"afm_applies_total":                {def + ",outcome=applied": 1},
		"afm_apply_duration_seconds":       {def + ",outcome=applied": 1},
		"afm_apply_phase_duration_seconds": {def + ",phase=render": 1, def + ",phase=sweep": 1},
		// The process' own series name no fabric.
		"afm_http_requests_total": {"code=202,method=POST,route=Port": 1, "code=400,method=other,route=unmatched": 1},
	}
	for name, series := range want {
		if len(got[name]) != len(series) {
			t.Errorf("%s = %v, want exactly %v", name, got[name], series)
		}
		for labels, v := range series {
			if g, ok := got[name][labels]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v; all: %v", name, labels, g, ok, v, got[name])
			}
		}
	}
	if age := got["afm_job_oldest_age_seconds"][def+",status=Pending"]; age < 89 || age > 120 {
		t.Errorf("oldest Pending job's age = %v s, want about 90", age)
	}
	if age, ok := got["afm_job_oldest_age_seconds"][def+",status=Running"]; !ok || age != 0 {
		t.Errorf("oldest Running job's age = %v (present %v), want 0 when none runs", age, ok)
	}
}

// TestStateDatabaseDown: a scrape while the database is down says so, counts
// the error, and leaves the database's series out rather than reporting zeros.
func TestStateDatabaseDown(t *testing.T) {
	m := New()
	m.Registry().MustRegister(&State{Fabric: m.Fabric(store.DefaultFabric), DB: &fakeDB{down: true}, SM: fakeSM{}})
	got := gathered(t, m)
	if got["afm_database_up"]["fabric=default"] != 0 || len(got["afm_database_up"]) != 1 {
		t.Errorf("afm_database_up = %v, want fabric=default at 0", got["afm_database_up"])
	}
	// The registry collects concurrently: a scrape's own failure shows in the
	// next one.
	if errs := gathered(t, m)["afm_database_errors_total"]; errs["operation=scrape_revision"] < 1 {
		t.Errorf("afm_database_errors_total = %v, want scrape_revision at least 1", errs)
	}
	for _, name := range []string{"afm_jobs", "afm_revision_recorded", "afm_leader_term", "afm_enforcement_errors",
		"afm_opensm_up", "afm_gate_closed", "afm_revision_applied"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s reported while the database is down (or on a follower): %v", name, got[name])
		}
	}
	if got["afm_leader"]["fabric=default"] != 0 || got["afm_opensm_restarts_total"]["fabric=default"] != 4 {
		t.Errorf("afm_leader %v, afm_opensm_restarts_total %v: want 0 and 4", got["afm_leader"], got["afm_opensm_restarts_total"])
	}
}

// TestFabricsAreSeparate: two fabrics' collectors and handles on one
// registry export series of their own, each with its fabric: leading,
// applying and auditing one fabric, or ending its term, leaves the other's
// as they are.
func TestFabricsAreSeparate(t *testing.T) {
	m := New()
	def, storage := m.Fabric(store.DefaultFabric), m.Fabric("storage")
	if again := m.Fabric("storage"); again != storage {
		t.Fatal("a second Fabric(storage) made another handle")
	}
	m.Registry().MustRegister(
		&State{Fabric: def, DB: &fakeDB{jobs: map[string]int64{store.StatusPending: 1}}, SM: fakeSM{running: true},
			Ready: func(context.Context) bool { return true }},
		&State{Fabric: storage, DB: &fakeDB{down: true}, SM: fakeSM{},
			Ready: func(context.Context) bool { return false }},
		&SecondSM{Fabric: def, DB: fakeSecondSMs{}},
		&SecondSM{Fabric: storage, DB: fakeSecondSMs{sms: []store.SecondSM{{PortGUID: 0x0002c90300a10001, Priority: 15, State: "MASTER"}}}},
	)
	def.Leading(3)
	storage.Leading(5)
	storage.ApplyFinished("failed", time.Second)
	storage.AuditFinished(audit.Summary{Findings: []audit.Finding{{Kind: audit.ForeignPKey}}}, nil)
	def.AuditFinished(audit.Summary{Findings: []audit.Finding{{Kind: audit.MissingPKey}}}, nil)

	got := gathered(t, m)
	for _, c := range []struct {
		name, labels string
		want         float64 // -1: absent
	}{
		{"afm_leader", "fabric=default", 1},
		{"afm_leader", "fabric=storage", 1},
		{"afm_ready", "fabric=default", 1},
		{"afm_ready", "fabric=storage", 0},
		{"afm_database_up", "fabric=default", 1},
		{"afm_database_up", "fabric=storage", 0},
		{"afm_jobs", "fabric=default,status=Pending", 1},
		{"afm_jobs", "fabric=storage,status=Pending", -1},
		{"afm_last_apply_failed", "fabric=default", 0},
		{"afm_last_apply_failed", "fabric=storage", 1},
		{"afm_applies_total", "fabric=storage,outcome=failed", 1},
		{"afm_applies_total", "fabric=default,outcome=failed", -1},
		{"afm_second_sm", "fabric=default,port_guid=,priority=,state=", 0},
		{"afm_second_sm", "fabric=storage,port_guid=0x0002c90300a10001,priority=15,state=MASTER", 1},
		{"afm_audit_breaches", "fabric=storage", 1},
		{"afm_audit_breaches", "fabric=default", 0},
		{"afm_audit_findings", "fabric=default,kind=missing_pkey", 1},
	} {
		v, ok := got[c.name][c.labels]
		if c.want < 0 && ok || c.want >= 0 && (!ok || v != c.want) {
			t.Errorf("%s{%s} = %v (present %t), want %v (-1: absent)", c.name, c.labels, v, ok, c.want)
		}
	}

	// The storage fabric's term ends: its audit's gauges go, the default's stay.
	storage.Leading(0)
	got = gathered(t, m)
	if got["afm_leader"]["fabric=storage"] != 0 || got["afm_leader"]["fabric=default"] != 1 {
		t.Errorf("afm_leader after storage's term = %v, want storage 0 and default 1", got["afm_leader"])
	}
	if got["afm_audit_breaches"]["fabric=storage"] != 0 || got["afm_audit_findings"]["fabric=default,kind=missing_pkey"] != 1 {
		t.Errorf("after storage's term: breaches %v, findings %v; want storage's forgotten, default's kept",
			got["afm_audit_breaches"], got["afm_audit_findings"])
	}
	for labels := range got["afm_audit_findings"] {
		if strings.HasPrefix(labels, "fabric=storage,") {
			t.Errorf("afm_audit_findings{%s} outlived storage's term", labels)
		}
	}
}

// exported is every metric name the manager can export, with the series a
// histogram adds, each true when its series carry the fabric label.
func exported(t *testing.T) map[string]bool {
	m := New()
	f := m.Fabric(store.DefaultFabric)
	m.Registry().MustRegister(&State{Fabric: f, DB: &fakeDB{}, SM: fakeSM{}}, &SecondSM{Fabric: f}, &SetFailures{Fabric: f})
	ch := make(chan *prometheus.Desc, 256)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	labelled := regexp.MustCompile(`(constLabels|variableLabels): \{[^}]*\bfabric\b`)
	names := map[string]bool{}
	for d := range ch {
		n := fq.FindStringSubmatch(d.String())[1]
		owned := labelled.MatchString(d.String())
		for _, s := range []string{"", "_bucket", "_sum", "_count"} {
			names[n+s] = owned
		}
	}
	return names
}

// fabricFiltered checks that expr, a query of deploy's files, keeps the
// fabrics apart wherever it reads a fabric-owned series: every aggregation
// keeps the fabric label, and (selector, for the dashboard) every such series
// is selected by the dashboard's fabric variable.
func fabricFiltered(expr string, owned map[string]bool, selector string) []string {
	var wrong []string
	reads := false
	for _, m := range regexp.MustCompile(`\b(afm_[a-z_]+)(\{[^}]*\})?`).FindAllStringSubmatch(expr, -1) {
		if !owned[m[1]] {
			continue
		}
		reads = true
		if selector != "" && !strings.Contains(m[2], selector) {
			wrong = append(wrong, m[1]+" is not selected by "+selector)
		}
	}
	if !reads {
		return wrong
	}
	for _, m := range regexp.MustCompile(`\b(sum|max|min|avg|count)\s*(by\s*\(([^)]*)\))?\s*\(`).FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(strings.Split(strings.ReplaceAll(m[3], " ", ""), ","), FabricLabel) {
			wrong = append(wrong, strings.TrimSpace(m[0])+" merges the fabrics")
		}
	}
	return wrong
}

// TestDeployFilesUseExportedMetrics keeps the alert rules and the Grafana
// dashboard in step with the code: every afm_ metric they read exists, the
// dashboard is valid JSON with a query in each panel, and both keep the
// fabrics apart (the rules aggregate by fabric, the dashboard also selects by
// its fabric variable).
func TestDeployFilesUseExportedMetrics(t *testing.T) {
	names := exported(t)
	files := []string{filepath.Join("..", "..", "deploy", "prometheus", "afm-alerts.yml")}
	dashboards, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "grafana", "*.json"))
	if len(dashboards) == 0 {
		t.Fatal("no dashboard in deploy/grafana")
	}
	files = append(files, dashboards...)
	used := regexp.MustCompile(`\bafm_[a-z_]+`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := used.FindAllString(string(text), -1)
		if len(seen) == 0 {
			t.Errorf("%s reads no afm_ metric", f)
		}
		for _, n := range seen {
			if _, ok := names[n]; !ok {
				t.Errorf("%s reads %s, which the manager does not export", f, n)
			}
		}
	}
	for _, f := range dashboards {
		var d struct {
			Title      string
			UID        string
			Templating struct{ List []struct{ Name string } }
			Panels     []struct {
				ID      int
				Type    string
				Title   string
				Targets []struct{ Expr string }
			}
		}
		text, _ := os.ReadFile(f)
		if err := json.Unmarshal(text, &d); err != nil {
			t.Fatalf("%s is not valid JSON: %v", f, err)
		}
		if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
			t.Errorf("%s: title %q, uid %q, %d panels; want all three", f, d.Title, d.UID, len(d.Panels))
		}
		var ids []int
		for _, p := range d.Panels {
			if slices.Contains(ids, p.ID) {
				t.Errorf("%s: panel id %d twice", f, p.ID)
			}
			ids = append(ids, p.ID)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 || p.Targets[0].Expr == "" {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, q := range p.Targets {
				for _, why := range fabricFiltered(q.Expr, names, `fabric=~"$fabric"`) {
					t.Errorf("%s: panel %q: %s: %s", f, p.Title, q.Expr, why)
				}
			}
		}
		if !slices.ContainsFunc(d.Templating.List, func(v struct{ Name string }) bool { return v.Name == FabricLabel }) {
			t.Errorf("%s has no fabric variable", f)
		}
	}
	rules, _ := os.ReadFile(files[0])
	for _, m := range regexp.MustCompile(`(?m)^\s*expr:\s*(.+)$`).FindAllStringSubmatch(string(rules), -1) {
		for _, why := range fabricFiltered(m[1], names, "") {
			t.Errorf("%s: %s: %s", files[0], m[1], why)
		}
	}
}
