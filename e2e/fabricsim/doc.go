// Package fabricsim runs a simulated InfiniBand fabric for tests: ibsim (Debian
// package ibsim-utils) answers the management datagrams of a fabric described in
// a topology file, and every program started with the fabric's environment
// (libumad2sim, package libumad2sim0, preloaded) talks to it instead of
// /dev/infiniband. No hardware, kernel module or root is needed, and fabrics in
// different directories are independent, so tests can run in parallel.
//
// The harness starts only ibsim: the program under test runs OpenSM itself, with
// Fabric.Env (or the file Fabric.EnvFile) added to OpenSM's environment, the
// fabric directory as its working directory and "guid <SMGUID>" in its
// opensm.conf. OpenSM's cache goes to the fabric directory (OSM_CACHE_DIR), and
// that is where PKeys finds the LID of a port (file guid2lid), so PKeys works
// once OpenSM has swept the fabric.
//
// Topology: an HCA named "SM" (port GUID SMGUID; the default attach point of
// every client, SIM_HOST=SM), hosts H1..HN with port GUIDs HostGUID(i), switches
// S1..SM with GUIDs SwitchGUID(k) in a chain, hosts spread round-robin over the
// switches. P_Key tables hold 64 entries on HCAs and switch ports.
//
// What the simulator cannot show: ibsim ignores M_Keys, keeps no partition
// enforcement bits and enforces no P_Keys on traffic; tests can check P_Key
// tables and OpenSM's log, not isolation itself.
//
// The ibsim console (Fabric.Sim) changes the fabric under a running OpenSM:
//
//	Error "H1"[1] 100 22   drop every MAD for attribute 22 (P_KeyTable) to H1 port 1
//	Error "H1"[1] 0        stop dropping
//	Unlink "H2"            take H2's links down (OpenSM gets a trap and sweeps)
//	ReLink "H2"            and up again
package fabricsim
