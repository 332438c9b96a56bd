package health

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

var update = flag.Bool("update", false, "rewrite testdata/answers/ from the checker")

// leaseSays is a lease's answer on whether a live leader holds it.
type leaseSays struct {
	live bool
	why  string
}

func (l leaseSays) LiveLeader(context.Context) (bool, string, error) { return l.live, l.why, nil }

// TestAnswersUnchanged: the JSON bodies of /healthz, /readyz and each
// fabric's readiness, in every case below, are byte for byte those of
// testdata/answers/, which the checker wrote before its fabrics became
// one list (the default first): the list changes how the checker is built,
// not what it answers. Since then, only an error's text left them: /readyz
// withholds it (TestReadyWithholdsErrors).
func TestAnswersUnchanged(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	live := store.Leadership{Term: 9, Holder: "b pid 2", Heartbeat: at(time.Second)}
	dead := store.Leadership{Term: 9, Holder: "b pid 2", Heartbeat: at(time.Minute)}
	type fab = Fabric
	for _, tt := range []struct {
		name    string
		fabrics []Fabric // the default first
	}{
		{"one fabric, leader ready", []fab{{Name: "default", DB: fakeDB{}, Self: self{term: 4}, SM: sm{running: true}}}},
		{"one fabric, leader failing everything", []fab{{Name: "default", DB: fakeDB{err: down},
			Self: self{term: 4, failed: true}, SM: sm{err: errors.New("SIGHUP: no such process")}}}},
		{"one fabric, follower of a dead leader", []fab{{Name: "default", DB: fakeDB{l: dead}, Self: self{}, SM: sm{}}}},
		{"one fabric, follower before any leader", []fab{{Name: "default", DB: fakeDB{}, Self: self{}, SM: sm{}}}},
		{"one fabric, follower without a live lease", []fab{{Name: "default", DB: fakeDB{l: live}, Self: self{}, SM: sm{},
			Leader: leaseSays{why: "the lease expired 12s ago"}}}},
		{"three fabrics, all ready", []fab{
			{Name: "default", DB: fakeDB{}, Self: self{term: 4}, SM: sm{running: true}},
			{Name: "storage", DB: fakeDB{l: live}, Self: self{}, SM: sm{}},
			{Name: "compute", DB: fakeDB{}, Self: self{term: 2}, SM: sm{running: true}, Leader: leaseSays{live: true}}}},
		{"three fabrics, each failing", []fab{
			{Name: "default", DB: fakeDB{l: dead}, Self: self{}, SM: sm{}},
			{Name: "storage", DB: fakeDB{l: dead}, Self: self{}, SM: sm{}},
			{Name: "compute", DB: fakeDB{err: down}, Self: self{term: 2}, SM: sm{}}}},
	} {
		c := checkerOf(tt.fabrics)
		c.HeartbeatTimeout = 10 * time.Second
		now := time.Unix(1700000000, 0)
		c.now = func() time.Time { return now }
		c.Loop("applier", time.Minute).Active(true)
		now = now.Add(2 * time.Minute)
		answers := map[string]Report{"healthz": c.Live(), "readyz": c.Ready(context.Background())}
		for _, f := range append(tt.fabrics, Fabric{Name: "unknown"}) {
			answers["ready of "+f.Name] = c.FabricReady(context.Background(), f.Name)
		}
		got, err := json.MarshalIndent(answers, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "answers", tt.name+".json")
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: the answers are\n%s\nwant (%s)\n%s", tt.name, got, golden, want)
		}
	}
}

// checkerOf is a checker of fabrics, the default first.
func checkerOf(fabrics []Fabric) *Checker { return &Checker{Fabrics: fabrics} }
