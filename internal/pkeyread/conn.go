package pkeyread

import "context"

// Conn sends SMPs through one of the manager's HCA ports, one at a time.
type Conn interface {
	// Send sends the MAD (MADSize bytes) to the port at lid (PermissiveLID
	// for a directed-route SMP, which its path routes) and returns the
	// answer carrying the same transaction id. No answer by ctx's deadline is
	// an error; the Conn may then be unusable, and the caller closes it.
	Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error)
	Close() error
}

// Dialer opens Conns; a Reader opens one for each of its workers.
type Dialer interface {
	Dial(ctx context.Context) (Conn, error)
}
