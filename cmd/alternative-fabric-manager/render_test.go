package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

const (
	networkID = "3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f"
	portGUID  = fabric.GUID(0x0002c90300000101)
)

// fabricDatabase records one network (VLAN 101) with one port in a new SQLite
// database, and returns the configuration that points at it, with extra lines
// added to [opensm].
func fabricDatabase(t *testing.T, opensm string) *config.Config {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	connection := "sqlite:///" + filepath.Join(dir, "afm.db")
	conn, err := config.ParseConnection(connection)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storeopen.Open(ctx, conn.Engine, conn.DSN, true, store.Rules{}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer st.DB().Close()
	vlan, guid := int64(101), portGUID
	if _, err := st.RecordNetwork(ctx, store.NetworkChange{Operation: store.OpCreateNetwork,
		Network: store.NetworkSpec{ID: networkID, Name: "tenant-a", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &vlan}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort,
		Port: store.Port{ID: "port-1", NetworkID: networkID, GUID: &guid, Host: "h1"}}); err != nil {
		t.Fatal(err)
	}
	text := testenv.AFMConf{Token: "t", Connection: connection, Database: []string{"auto_migrate = false"},
		OpenSM: []string{strings.TrimSuffix(opensm, "\n")}}.String()
	cfg, err := config.Parse(strings.NewReader(text), "afm.conf")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func writeTemplate(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "partitions.conf.j2")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRenderPartitions(t *testing.T) {
	static := writeTemplate(t, "{{ default_partition }}\n{% for n in networks %}\n{{ n.name }}={{ n.pkey }} :{{ n.members_text }} ;\n{% endfor %}\n"+
		"{{ flat.name }}={{ flat.pkey }} : ;\nstorage=0x0200 : 0x0002c90300a00001=full ;\n")
	tests := []struct {
		name   string
		opensm string
		wants  []string
	}{
		{"built-in template", "", []string{
			"Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n",
			"net-0065-3f1c5a9e-8d2b-4c7a-9e6=0x0065, ipoib :\n    0x0002c90300000101=full ;\n",
			"flat=0x7ffe : ;\n",
		}},
		{"configured flat pkey and default partition", "flat_pkey = 0x0fff\ndefault_partition = Default=0x7fff : ALL=limited, SELF=full ;\n", []string{
			"\nDefault=0x7fff : ALL=limited, SELF=full ;\n",
			"flat=0x0fff : ;\n",
		}},
		{"custom template", "partitions_template = " + static + "\n", []string{
			"net-0065-3f1c5a9e-8d2b-4c7a-9e6=0x0065 :\n    0x0002c90300000101=full ;\n",
			"storage=0x0200 : 0x0002c90300a00001=full ;\n",
		}},
		{"shared default partition", "shared_default_partition = true\ndefault_partition = Default=0x7fff, ipoib : ALL=full ;\n", []string{
			"Default=0x7fff, ipoib : ALL=full ;\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fabricDatabase(t, tt.opensm)
			var out bytes.Buffer
			if err := renderFabric(context.Background(), cfg, config.DefaultFabric, &out, quietLog()); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.wants {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output does not contain %q:\n%s", want, out.String())
				}
			}
			state := partitions.State{DefaultPartition: cfg.Fabrics[0].OpenSM.DefaultPartition,
				Networks: []partitions.Network{{ID: networkID, PKey: 101, Members: []fabric.GUID{portGUID}}},
				Flat:     partitions.FlatPartition{PKey: cfg.Fabrics[0].OpenSM.FlatPKey},
				Rules:    partitions.Rules{SharedDefaultPartition: cfg.Fabrics[0].OpenSM.SharedDefaultPartition}}
			if err := partitions.Check(out.Bytes(), state); err != nil {
				t.Fatalf("output fails the check: %v", err)
			}
		})
	}
}

// A refused file is not printed; every problem is, one per line.
func TestRenderPartitionsRefuses(t *testing.T) {
	leaky := writeTemplate(t, "{{ default_partition }}\n{% for n in networks %}\n{{ n.name }}={{ n.pkey }} : ;\n{% endfor %}\n"+
		"flat={{ flat.pkey }} : ;\nstorage=0x0200 : ALL=full, 0x0002c90300000101=limited ;\n")
	tests := []struct {
		name   string
		opensm string
		wants  []string
	}{
		{"file fails the check", "partitions_template = " + leaky + "\n", []string{
			"revision 2 renders to a file that fails the check:\n  line 2: port 0x0002c90300000101 of network " + networkID + " is missing",
			"\n  line 4: ALL=full in partition storage",
			"\n  line 4: port 0x0002c90300000101 of network " + networkID + " may be in no other partition",
		}},
		// Without the hardening group default_partition, which refuses it when the
		// configuration is read, the check of the file still does.
		{"shared default partition not allowed", "hardening = m_key, keys, enforcement\ndefault_partition = Default=0x7fff, ipoib : ALL=full ;\n", []string{
			"default_partition: ALL=full in the default partition",
		}},
		{"template fails", "partitions_template = " + writeTemplate(t, "{{ networks[0].vlan }}\n") + "\n", []string{
			"revision 2: partitions template ", "line 1", "vlan",
		}},
		{"template does not parse", "partitions_template = " + writeTemplate(t, "{% for n in networks %}\n") + "\n", []string{
			"partitions template ", "endfor",
		}},
		{"template missing", "partitions_template = /nonexistent/partitions.conf.j2\n", []string{
			"[opensm] partitions_template: open /nonexistent/partitions.conf.j2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fabricDatabase(t, tt.opensm)
			var out bytes.Buffer
			err := renderFabric(context.Background(), cfg, config.DefaultFabric, &out, quietLog())
			if err == nil {
				t.Fatalf("rendered:\n%s", out.String())
			}
			if out.Len() != 0 {
				t.Errorf("wrote %q despite the error", out.String())
			}
			for _, want := range tt.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

// --render never migrates, even with auto_migrate = true: trying a template
// with a new binary must not upgrade the production schema.
func TestRenderPartitionsDoesNotMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afm.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil { // a database without the schema
		t.Fatal(err)
	}
	for _, autoMigrate := range []string{"false", "true"} {
		text := testenv.AFMConf{Token: "t", Connection: "sqlite:///" + path, Database: []string{"auto_migrate = " + autoMigrate}}.String()
		cfg, err := config.Parse(strings.NewReader(text), "afm.conf")
		if err != nil {
			t.Fatal(err)
		}
		if err := renderFabric(context.Background(), cfg, config.DefaultFabric, io.Discard, quietLog()); err == nil {
			t.Errorf("auto_migrate = %s: rendered from a database without the schema", autoMigrate)
		}
	}
	st, err := storeopen.Open(context.Background(), config.EngineSQLite, path, false, store.Rules{}, quietLog())
	if err == nil {
		st.DB().Close()
	}
	if behind := (*storeopen.SchemaBehindError)(nil); !errors.As(err, &behind) || behind.Current != 0 {
		t.Errorf("--render created the schema: opening the database again gave %v", err)
	}
}

// A configuration changed under the recorded networks (flat_pkey now a
// network's VLAN, a static partition on its pkey) is reported by --render,
// and refuses the manager's start, naming each network, its VLAN and the rule.
func TestRecordedStateConflictsWithConfiguration(t *testing.T) {
	staticOn101 := writeTemplate(t, "{{ default_partition }}\nstorage=0x0065 : ALL=limited ;\n"+
		"{% for n in networks %}\n{{ n.name }}={{ n.pkey }} :{{ n.members_text }} ;\n{% endfor %}\n{{ flat.name }}={{ flat.pkey }} : ;\n")
	tests := []struct {
		name, opensm string
		wants        []string
	}{
		{"flat_pkey is a network's VLAN", "flat_pkey = 0x0065\n", []string{
			"network " + networkID + ": VLAN ID 101 is the flat networks' partition key 0x0065 ([opensm] flat_pkey)",
			"the configuration changed under these networks",
		}},
		{"a static partition on a network's pkey", "partitions_template = " + staticOn101 + "\n", []string{
			"network " + networkID + `: VLAN ID 101 is the partition key 0x0065 of static partition "storage" of the partitions template`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fabricDatabase(t, tt.opensm)
			var out bytes.Buffer
			err := renderFabric(context.Background(), cfg, config.DefaultFabric, &out, quietLog())
			for _, want := range tt.wants {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("--render: error %v does not say %q", err, want)
				}
			}

			// The manager itself, with the same configuration.
			dir := t.TempDir()
			path := filepath.Join(dir, "afm.conf")
			conf := testenv.AFMConf{Listen: "127.0.0.1:0", Token: "render-test-token-0123", Connection: cfg.Database.Connection,
				ConfigDir: filepath.Join(dir, "opensm"), OpenSM: []string{strings.TrimSuffix(tt.opensm, "\n")}}
			if err := conf.Write(path); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = run(ctx, path, slog.LevelError, nil)
			if ctx.Err() != nil {
				t.Fatalf("the manager started (and ran until the test stopped it): %v", err)
			}
			for _, want := range tt.wants {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("start-up: error %v does not say %q", err, want)
				}
			}
		})
	}
}

// --render writes the recorded Kubernetes partitions; a configuration that no
// longer gives Kubernetes their pkey (the pkeys API turned off, the range
// moved) is reported as a conflict, and refuses the start.
func TestRenderKubernetesPartitions(t *testing.T) {
	cfg := fabricDatabase(t, "")
	conn, err := config.ParseConnection(cfg.Database.Connection)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kube := fabric.PKeyRange{First: 0x1000, Last: 0x1fff}
	st, err := storeopen.Open(ctx, conn.Engine, conn.DSN, false, store.Rules{KubernetesRange: kube}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.AddKubernetesGUIDs(ctx, store.KubernetesAddition{PKey: 0x1005, Members: []store.KubernetesMember{
		{GUID: 0x0002c90300000201, Membership: fabric.Limited}}})
	st.DB().Close()
	if err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err = renderFabric(ctx, cfg, config.DefaultFabric, &out, quietLog())
	if err == nil || !strings.Contains(err.Error(), "Kubernetes pkey 0x1005: no [ufm_pkeys] pkey_range is configured") {
		t.Errorf("--render without a Kubernetes range: %v", err)
	}
	cfg.Fabrics[0].UFMPKeys = config.UFMPKeys{Username: "ib-kubernetes", Password: "render-test-password", PKeyRange: kube}
	out.Reset()
	if err := renderFabric(ctx, cfg, config.DefaultFabric, &out, quietLog()); err != nil {
		t.Fatal(err)
	}
	// ib-kubernetes sent no QoS: the line is as before QoS existed.
	if want := "k8s-1005=0x1005, ipoib :\n    0x0002c90300000201=limited ;\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("rendered:\n%s\nwant it to end with\n%s", out.String(), want)
	}
}
