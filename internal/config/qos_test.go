package config

import (
	"strings"
	"testing"
)

// TestQoSOptionsOwnedOnlyWithAPKeysClient: [opensm_conf]'s qos and
// qos_policy_file are the operator's unless a pkeys client of the fabric
// ([ufm_pkeys] or a [ufm_pkeys:NAME] of it) may set a pkey's QoS; then the
// load refuses them, naming the option and the client.
func TestQoSOptionsOwnedOnlyWithAPKeysClient(t *testing.T) {
	const head = "[api]\ntoken = s3cret-token-0123456789\nphysical_networks = ibnet\n"
	const kube = "[ufm_pkeys]\nusername = k8s\npassword = s3cret-password-0123456789\npkey_range = 0x1000-0x1fff\n"
	const nico = "[ufm_pkeys:nico]\ntoken = s3cret-token-nico-0123456\npkey_range = 0x2000-0x2fff\n"
	const storage = "[fabric:storage]\nphysical_networks = storage\nconfig_dir = /var/lib/afm/storage\n"
	tests := []struct {
		name, text string
		owns       []bool // OwnsQoS of each fabric, the default first
		want       []string
	}{
		{"no pkeys client: the operator's qos", head + "[opensm_conf]\nqos = TRUE\nqos_policy_file = /etc/opensm/qos-policy.conf\n",
			[]bool{false}, nil},
		{"ib-kubernetes' client", head + kube + "[opensm_conf]\nqos = TRUE\n", nil,
			[]string{"[opensm_conf] qos: the manager sets this option itself on this fabric, because its pkeys client " +
				"[ufm_pkeys] may set a pkey's QoS"}},
		{"a named client", head + nico + "[opensm_conf]\nQOS_POLICY_FILE = /etc/opensm/qos-policy.conf\n", nil,
			[]string{"[opensm_conf] QOS_POLICY_FILE: the manager sets this option itself on this fabric, because its " +
				"pkeys client [ufm_pkeys:nico] may set"}},
		{"another fabric's client leaves this one's qos", head + nico + "[opensm_conf]\nguid = 0x1\n" + storage +
			"[fabric:storage:opensm_conf]\nguid = 0x2\nqos = TRUE\n", []bool{true, false}, nil},
		{"clients without qos lines", head + kube + nico, []bool{true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tt.text), "afm.conf")
			if tt.want != nil {
				for _, w := range tt.want {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("Parse = %v\nwant an error saying %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range c.Fabrics {
				if got := c.FabricConfig(f).OwnsQoS(); got != tt.owns[i] {
					t.Errorf("fabric %s OwnsQoS = %v, want %v", f.Name, got, tt.owns[i])
				}
			}
		})
	}
}
