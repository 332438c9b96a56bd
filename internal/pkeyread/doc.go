// Package pkeyread reads ports' P_Key tables back from the fabric: what a
// port's own table holds, not what OpenSM says it wrote. It is the proof that
// a partition change reached a port (or left it), and the switch port facing a
// host, where the switch enforces partitions.
//
// It speaks Subnet Management Packets (SMPs) itself, Gets of three
// attributes: NodeInfo (which port answers at a LID, and its table's size),
// SwitchInfo (a switch port's table size) and P_KeyTable (32 entries a block).
// Every Get carries the M_Key, which M_Key protection requires of a Get. A
// LID is only what OpenSM assigned at its last sweep, so each read first asks
// the port at the LID for its GUID: a LID given to another port since (a host
// replaced, a second subnet manager) fails the read instead of proving
// something about the wrong port.
//
// Gets are LID-routed, and a Get the LID does not answer goes by the
// directed route OpenSM's subnet dump gives (route.go), as OpenSM itself
// reaches every port: no forwarding table is needed, so a read reaches a
// port while its routes are wrong (after a reroute) or beyond the 16
// switches the simulator forwards a LID-routed SMP across. The route's
// answer is held to the same GUID check. A Get without answer is sent again
// with backoff within the port's deadline; SMPs outstanding are bounded (as
// OpenSM's max_wire_smps): a port's read sends together the SMPs that wait
// for no other answer (a table's block with the NodeInfo that proves the
// node), a few a port and a few more in all, and uses an answer only once
// its node proved to be the one read.
//
// Why SMPs in Go: a table read this way is two to four datagrams, well under a
// millisecond on the simulated fabric, where the infiniband-diags tools
// (smpquery pkeys) cost a process, a new attachment and, with -G, an SA query
// each: 80 to 170 ms a port, and at most about eight at once (the simulator
// serves ten clients, OpenSM is one). libibmad through cgo would be as fast
// but ends the manager's static, cgo-free build. A Go client needs a
// transport: Conn sends one MAD and returns its answer. SimDialer is the
// simulated fabric's (ibsim's own client protocol, which libumad2sim speaks
// for C programs and which Go's direct system calls would bypass);
// UmadDialer is real hardware's (the kernel's user MAD device of a local HCA
// port, in pure Go).
//
// Targets places host ports by OpenSM's subnet dump (their LIDs, directed
// routes and the switch ports facing them); Reader reads many ports at once, on a bounded number of
// connections, each port under its own deadline, and returns one Result per
// port; Prove judges the results against what a change wants (a membership,
// or the pkey gone), on the host port and on the switch port facing it.
package pkeyread
