package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// adoptConfig is fabricDatabase's configuration (network VLAN 101, pkey
// 0x0065, with port 0x0002c90300000101) written to a file, for the commands
// that read one.
func adoptConfig(t *testing.T) string {
	t.Helper()
	cfg := fabricDatabase(t, "")
	path := filepath.Join(t.TempDir(), "afm.conf")
	conf := testenv.AFMConf{Token: "t", Connection: cfg.Database.Connection, Database: []string{"auto_migrate = false"}}
	if err := conf.Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeRunning(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "partitions.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const runningPartitions = `Default=0x7fff, ipoib : ALL=limited, SELF=full ;
tenant_a=0x0010, ipoib, mtu=4 : 0x0002c90300000a01=full, 0x0002c90300000a02=limited ;
tenant_net=0x0065, ipoib : 0x0002c90300000101=full, 0x0002c90300000a03=full ;
`

func TestAdoptPartitions(t *testing.T) {
	ctx := context.Background()
	conf := adoptConfig(t)
	var out bytes.Buffer
	if err := runAdopt(ctx, conf, config.DefaultFabric, writeRunning(t, runningPartitions), quietLog(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"partition Default (0x7fff): not adopted, the manager writes [opensm] default_partition instead\n",
		"partition tenant_a (0x0010): adopted, 2 members\n",
		"partition tenant_net (0x0065): adopted, 1 members; network " + networkID + " has the pkey",
		"member 0x0002c90300000101 not adopted: port port-1",
		"adopted at revision 3",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	cfg := loadConfig(t, conf)
	var file bytes.Buffer
	if err := renderFabric(ctx, cfg, config.DefaultFabric, &file, quietLog()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"tenant_a=0x0010, ipoib, mtu=4 :\n    0x0002c90300000a01=full,\n    0x0002c90300000a02=limited ;\n",
		"=0x0065, ipoib :\n    0x0002c90300000101=full,\n    0x0002c90300000a03=full ;\n",
	} {
		if !strings.Contains(file.String(), want) {
			t.Errorf("rendered file lacks %q:\n%s", want, file.String())
		}
	}

	assertAdoptedStatus(t, conf)

	// The same file again: a line for each partition, and nothing recorded.
	out.Reset()
	jobs := adoptJobs(t, conf)
	if err := runAdopt(ctx, conf, config.DefaultFabric, writeRunning(t, runningPartitions), quietLog(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"partition Default (0x7fff): not adopted",
		"partition tenant_a (0x0010): left alone: adopted already as the file has it\n",
		"partition tenant_net (0x0065): left alone: adopted already as the file has it; network " + networkID + " has the pkey",
		"2 partitions adopted already: nothing changed, nothing recorded\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the same file again: output lacks %q:\n%s", want, out.String())
		}
	}
	if again := adoptJobs(t, conf); again != jobs {
		t.Errorf("the same file again: revision and jobs %v, want %v as before: nothing recorded", again, jobs)
	}

	out.Reset()
	if err := runReleaseAdopted(ctx, conf, config.DefaultFabric, "0x10", quietLog(), &out); err != nil ||
		!strings.Contains(out.String(), "released from pkey 0x0010 at revision 4") {
		t.Errorf("release: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "): 0x0002c90300000a01, 0x0002c90300000a02\n") {
		t.Errorf("release does not name the GUIDs released:\n%s", out.String())
	}
	if err := runReleaseAdopted(ctx, conf, config.DefaultFabric, "16", quietLog(), &out); err == nil || !strings.Contains(err.Error(), "pkey 0x0010 has no adopted members") {
		t.Errorf("releasing again: %v", err)
	}
	if err := runReleaseAdopted(ctx, conf, config.DefaultFabric, "0x7fff", quietLog(), &out); err == nil || !strings.Contains(err.Error(), "is not a pkey") {
		t.Errorf("releasing the default pkey: %v", err)
	}
}

// A file the manager cannot adopt whole records nothing.
func TestAdoptRefusesAllOrNothing(t *testing.T) {
	ctx := context.Background()
	conf := adoptConfig(t)
	if err := runAdopt(ctx, conf, config.DefaultFabric, writeRunning(t, runningPartitions), quietLog(), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, line, want string }{
		{"keyword member", "everyone=0x0030 : ALL_CAS=full ;", "member ALL_CAS=full cannot be adopted"},
		// Parse takes the file; the rendered file would hold the name twice,
		// this one and the partition adopted before.
		{"a name already adopted", "tenant_a=0x0031 : 0x0002c90300000a09=full ;", "the partitions file would be refused"},
		{"invalid line", "broken=0x0032 : 0x0002c90300000a09=fulll ;", "nothing adopted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\ngood=0x0040 : 0x0002c90300000a08=full ;\n" + tt.line + "\n"
			err := runAdopt(ctx, conf, config.DefaultFabric, writeRunning(t, text), quietLog(), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			var file bytes.Buffer
			if err := renderFabric(ctx, loadConfig(t, conf), config.DefaultFabric, &file, quietLog()); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(file.String(), "good=0x0040") {
				t.Errorf("a refused file adopted partition good:\n%s", file.String())
			}
		})
	}
}

// adoptJobs is the default fabric's revision and job count, as the
// configuration at conf's database has them.
func adoptJobs(t *testing.T, conf string) [2]int64 {
	t.Helper()
	cfg := loadConfig(t, conf)
	db, err := openExisting(t.Context(), cfg, fabricRules(cfg), time.Minute, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Fabric(store.DefaultFabric)
	rev, err := st.Revision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	counts, err := st.CountJobsByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return [2]int64{rev, n}
}

func loadConfig(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertAdoptedStatus checks what --status says of runningPartitions adopted.
func assertAdoptedStatus(t *testing.T, conf string) {
	t.Helper()
	cfg := loadConfig(t, conf)
	st, err := openExisting(context.Background(), cfg, fabricRules(cfg), time.Minute, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := status.Read(context.Background(), cfg.FabricConfig(cfg.Fabrics[0]), st.Fabric(store.DefaultFabric))
	if err != nil {
		t.Fatal(err)
	}
	want := []status.Adopted{
		{PKey: "0x0010", Name: "tenant_a", Owner: "", Flags: []string{"ipoib", "mtu=4"}, Revision: 3,
			Members: []status.AdoptedMember{{GUID: "0x0002c90300000a01", Membership: "full"}, {GUID: "0x0002c90300000a02", Membership: "limited"}}},
		{PKey: "0x0065", Name: "tenant_net", Owner: "network " + networkID, Flags: []string{"ipoib"}, Revision: 3,
			Members: []status.AdoptedMember{{GUID: "0x0002c90300000a03", Membership: "full"}}},
	}
	if !reflect.DeepEqual(s.Adopted, want) {
		t.Errorf("--status adopted = %+v, want %+v", s.Adopted, want)
	}
	var text bytes.Buffer
	if err := status.Print(&text, s); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"adopted:           pkey 0x0010 (tenant_a), 2 members, no owner yet",
		"pkey 0x0065 (tenant_net), 1 members, owned by network " + networkID} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("--status lacks %q:\n%s", w, text.String())
		}
	}
	js, err := json.Marshal(s)
	if err != nil || !strings.Contains(string(js), `"adopted":[{"pkey":"0x0010","name":"tenant_a","owner":"","members":[{"guid":"0x0002c90300000a01","membership":"full"}`) {
		t.Errorf("--status --json: %s, %v", js, err)
	}
}
