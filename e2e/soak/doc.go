// Package soak is a randomized, model-checked run of the manager against a
// real OpenSM on a simulated fabric (package fabricsim), with faults.
//
// A seeded generator draws requests as networking-mlnx sends them; a Model of
// the recorded state, fed only by the answers, says how each must be answered
// (202, 400 or 404) and what every host's pkey table and the partitions file
// must then hold. When a job first reads Completed, the checker reads the
// real pkey tables of the hosts the request changed (and, one time in five, of
// all hosts) and compares them with the model; after each fault the fabric
// must converge on the model. Faults (kill -9 of the manager or OpenSM,
// SIGSTOP of OpenSM, links down in ibsim, a hand edit of the partitions file,
// a database restart, a leader kill among several managers; and the nemesis
// of the windows between the manager's steps: a slowed or black-holed
// database connection through a proxy of the soak's, a Galera node killed
// under managers writing through all three, OpenSM stopped mid-sweep past
// sweep_timeout, a host OpenSM cannot program, the database restored from a
// backup) are dealt from the same seed. ib-kubernetes runs at the same time
// as a second client, on hosts of its own, with a model of its own. No job id
// may answer for two changes, and no two OpenSMs may run at once.
// docs/soak.md describes the checks; e2e/cmd/afm-soak runs it.
package soak
