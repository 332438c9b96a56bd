package pkeyread

import (
	"strings"
	"testing"
)

// TestNewDialer: OpenSM's environment decides the transport, the last of a
// repeated key winning as in an exec environment.
func TestNewDialer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		want    SimDialer
		wantErr string
	}{
		{name: "simulated", env: []string{"PATH=/bin", "IBSIM_SOCKNAME=sim1", "SIM_HOST=S1"},
			want: SimDialer{Socket: "sim1", Node: "S1"}},
		{name: "env file after the process's", env: []string{"IBSIM_SOCKNAME=old", "SIM_HOST=A", "IBSIM_SOCKNAME=new", "SIM_HOST=B"},
			want: SimDialer{Socket: "new", Node: "B"}},
		{name: "simulator without a node", env: []string{"IBSIM_SOCKNAME=sim1"}, wantErr: `names the simulator "sim1" but no SIM_HOST`},
		{name: "real hardware", env: []string{"PATH=/bin"}, wantErr: "no transport for SMPs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDialer(tc.env, "no_such_hca_0:1")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewDialer: %v, %v; want an error saying %q", d, err, tc.wantErr)
				}
				return
			}
			if err != nil || d != tc.want {
				t.Fatalf("NewDialer: %#v, %v; want %#v", d, err, tc.want)
			}
		})
	}
}
