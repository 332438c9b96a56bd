package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestVerticalSlice: a VLAN network and a port, as networking-mlnx sends them,
// all the way to the pkey table of the host's port on a real OpenSM, on every
// database engine. A job is never Completed before its pkey is in the table.
func TestVerticalSlice(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			m := startManager(t, storetest.NewDatabase(t, engine), 2)
			h1 := m.fabric.Host("H1").PortGUID
			const netID = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"

			job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
			m.waitCompleted(job, nil)

			port := portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1))
			job = m.accept("POST", "/cloudx/Port", port)
			j := m.waitCompleted(job, func() {
				if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
					t.Fatalf("job read Completed while H1's pkey table is %s, without 0x8065", hex(got))
				}
			})
			if want := fmt.Sprintf("GUID %s is a full member of pkey 0x0065", h1); j.Summary != want {
				t.Errorf("Summary = %q, want %q", j.Summary, want)
			}
			if got := m.fabric.Host("H2").PortGUID; slices.Contains(m.pkeys(got), 0x8065) {
				t.Errorf("H2, not a member, holds 0x8065")
			}

			job = m.accept("DELETE", "/cloudx/Port/8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", port)
			m.waitCompleted(job, func() {
				if got := m.pkeys(h1); slices.Contains(got, 0x8065) || slices.Contains(got, 0x0065) {
					t.Fatalf("port removal read Completed while H1's pkey table is %s", hex(got))
				}
			})
		})
	}
}

func (m *manager) pkeys(port fabric.GUID) []uint16 {
	m.t.Helper()
	got, err := m.fabric.PKeys(m.t.Context(), port)
	if err != nil {
		m.t.Fatalf("read pkeys of %s: %v", port, err)
	}
	return got
}

// vendorClientID is the 20-octet client-id form Ironic uses for a port GUID.
func vendorClientID(g fabric.GUID) string {
	s := "ff:00:00:00:00:00:02:00:00:02:c9:00"
	for i := 7; i >= 0; i-- {
		s += fmt.Sprintf(":%02x", byte(uint64(g)>>(8*i)))
	}
	return s
}

func portBody(id, networkID, clientID string) string {
	return fmt.Sprintf(`{
  "id": %q,
  "network_id": %q,
  "device_owner": "baremetal:none",
  "binding:vnic_type": "baremetal",
  "binding:host_id": "e2c47a1b-5f6d-4c8e-a9b0-3d1f2e4c6a78",
  "extra_dhcp_opts": [{"opt_name": "client-id", "opt_value": %q, "ip_version": 4}],
  "network_qos_policy": null
}`, id, networkID, clientID)
}

func hex(pkeys []uint16) string {
	var s []string
	for _, p := range pkeys {
		s = append(s, fmt.Sprintf("0x%04x", p))
	}
	return "[" + strings.Join(s, " ") + "]"
}
