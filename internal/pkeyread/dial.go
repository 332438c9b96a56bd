package pkeyread

import "fmt"

// NewDialer is the transport the manager reads P_Key tables through: the
// simulated fabric's when OpenSM's environment (KEY=VALUE lines, later ones
// winning, as OpenSM gets them) attaches OpenSM to one (IBSIM_SOCKNAME), else
// the HCA port umadPort ("mlx5_0:1"; "" for the port OpenSM's guid names) of
// real hardware. The choice follows OpenSM's: reads go to the fabric OpenSM
// programs, never to another one the manager's own environment may name.
func NewDialer(opensmEnv []string, umadPort string) (Dialer, error) {
	if d, ok := SimDialerFromEnv(opensmEnv); ok {
		return d, nil
	}
	if sock, named := simSocketNamed(opensmEnv); named {
		// A simulator without a node to attach to would send SMPs from no
		// port: say so rather than fall back to real hardware.
		return nil, fmt.Errorf("OpenSM's environment names the simulator %q but no SIM_HOST to attach to", sock)
	}
	d, err := UmadDialer(umadPort)
	if err != nil {
		return nil, fmt.Errorf("no transport for SMPs: %w", err)
	}
	return d, nil
}

// simSocketNamed is the last IBSIM_SOCKNAME of env, if any.
func simSocketNamed(env []string) (sock string, ok bool) {
	d, _ := SimDialerFromEnv(env)
	return d.Socket, d.Socket != ""
}
