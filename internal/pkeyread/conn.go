package pkeyread

import "context"

// Conn sends SMPs through one of the manager's HCA ports, one at a time,
// unless it has a Concurrent method that says true (the simulator's and the
// umad transport's do): then Sends may overlap, each answered by its own
// MAD's transaction id, so that a port's SMPs that wait for no other answer
// go out together on the one connection a read holds.
type Conn interface {
	// Send sends the MAD (MADSize bytes) to the port at lid (PermissiveLID
	// for a directed-route SMP, which its path routes) and returns the
	// answer carrying the same transaction id. No answer by ctx's deadline is
	// an error; the Conn may then be unusable, and the caller closes it.
	Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error)
	Close() error
}

// Concurrent says whether conn takes overlapping Sends, answers matched
// to their requests by transaction id (mux.go): a simulator's or an HCA's
// connection, and a Pool's while the one it keeps does.
func Concurrent(conn Conn) bool {
	c, ok := conn.(interface{ Concurrent() bool })
	return ok && c.Concurrent()
}

// Dialer opens Conns; a Reader opens one for each of its workers.
type Dialer interface {
	Dial(ctx context.Context) (Conn, error)
}
