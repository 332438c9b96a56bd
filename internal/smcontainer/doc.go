// Package smcontainer runs or watches OpenSM in a Docker container, through
// the Docker Engine API ([opensm] driver = managed or docker). It holds only
// the engine's calls: the one opensm.Supervisor keeps OpenSM running (Start by
// a term, Stop by main, WaitReady, Reload, Restarts, Status and its status
// file), and this package gives it a container to start (Managed, an
// opensm.Runner) or a container someone else runs to watch (External, an
// opensm.Watcher), each signalled through the engine by its ID.
//
//   - Managed starts OpenSM in a container of its own ([opensm] container),
//     which joins the PID namespace of the manager's container ([opensm]
//     manager_container) and the host network. It gets only what OpenSM
//     uses of the manager's container: config_dir and the directories its
//     environment names, each bound by itself (never the manager's
//     configuration, database or Docker socket), and the InfiniBand devices;
//     no capability and never the manager's privilege. The manager replaces
//     only a container labelled with its own container's ID, removing it by
//     its ID.
//     When the manager's container stops, however it stops (SIGTERM, kill -9,
//     docker rm -f), the kernel kills every process of that PID namespace,
//     OpenSM included, and Docker removes OpenSM's container (it is started
//     with auto-remove). OpenSM never runs with partitions no manager keeps up
//     to date.
//   - External signals an OpenSM container someone else runs, which reads
//     [opensm] config_dir through a bind mount of the directory at the same
//     path. The manager never starts or stops it.
//
// Everything an operator can get wrong is checked before anything starts, by
// PrepareManaged and PrepareExternal, with an error that names the thing and
// what to do: an unreachable Docker engine, a container name taken by
// something that is not ours, an image without OpenSM, a config_dir OpenSM's
// container would not see.
//
// OpenSM's standard output holds the secret keys it loaded, so its container
// keeps no log (log driver "none"): what OpenSM has to say is in its log file,
// in config_dir, which the manager follows.
package smcontainer
