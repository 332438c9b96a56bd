package pkeyread

import "errors"

// UmadDialer is the transport of real hardware, SMPs through the kernel's
// umad device of the local HCA port port. None is built in yet: a manager on
// real hardware reads nothing back, and says so.
func UmadDialer(port string) (Dialer, error) {
	return nil, errors.New("no SMP transport for real hardware is built in yet (umad)")
}
