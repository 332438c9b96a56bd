// Package opensm drives OpenSM, the subnet manager that programs the partition
// keys into the fabric. It owns four things:
//
//   - opensm.conf and the per-module logging file: RenderConf and
//     PerModuleLoggingConf. The manager owns the options that make the rest of
//     this package work (log file, flushing, foreground mode) and refuses to let
//     an operator override them. The hardening groups (Hardening) add the
//     options that protect tenants from each other, with the secret Keys,
//     written only as far as the running OpenSM's Flavour knows them.
//   - Writing files OpenSM reads while it runs: WriteFileAtomic. A heavy sweep can
//     start at any moment and would apply a half-written partitions file.
//   - Reading OpenSM's log: ParseLog for whole files, FollowLog for a log that
//     grows, Tail, the one reader of the log for a term that hands each entry
//     to whoever needs it, and a Tail's WatchSweep, which proves from the log
//     that a partitions file is in the ports' tables (the chain of lines is
//     described on SweepWatch).
//   - Keeping OpenSM running: a Supervisor supervises it from Start to Stop
//     (across applier terms and database outages), restarts it when it exits,
//     reports its state and last error (Status, and a status file for
//     --status), knows when it is safe to signal, and latches a term's stop
//     (TermLatch). What it supervises starts through a small Runner: the
//     manager's child process (NewProcess, which keeps OpenSM's output, with
//     the secret keys it loaded, out of the manager's log) or a container
//     (package smcontainer); a Watcher instead follows an OpenSM someone else
//     runs.
//
// How to apply a new partitions file, in this order:
//
//	WriteFileAtomic(partitionsFile, data, 0o644) // the new file is in place
//	w, _, _ := tail.WatchSweep()                // any sweep logged after its position reads it
//	p.Reload(ctx)                               // SIGHUP: OpenSM starts a heavy sweep
//	res, _ := w.Wait(ctx, timeout)
//
// Taking the position after the rename (and before the signal) means that any
// heavy sweep whose start appears after the position began after the rename, so it
// parsed the new file: OpenSM reads the partitions file after discovery, in every
// heavy sweep.
//
// The facts about OpenSM this package relies on (log format, markers, signals)
// were checked against OpenSM 3.3.23 on a simulated fabric; the tests run the real
// program (see e2e/fabricsim).
package opensm
