// Package audit compares what the fabric's ports hold with the recorded
// state, between changes: the partitions file OpenSM was last seen applying
// says which pkeys each host port may hold and how, and the ports' own P_Key
// tables (read with SMPs, internal/pkeyread) say what they hold.
//
// Every host port of OpenSM's subnet dump is read, with the switch port
// facing it, not only the ports the state names: a port of no tenant that
// holds a tenant's pkey is the breach the audit is for. A finding is one of
//
//   - missing_pkey: a port (or the switch port facing it) lacks a pkey it is
//     recorded in: a tenant's port is cut off. Applying the state again
//     heals it.
//   - foreign_pkey: a port (or the switch port facing it) holds a pkey it is
//     not recorded in: an isolation breach.
//   - wrong_membership: a full member where the state says limited (a
//     breach: limited members may not talk to each other), or limited where
//     it says full (a cut-off, healed by applying again).
//   - switch_not_enforcing: the switch port facing a host does not enforce
//     partitions in both directions: the host may send with any pkey.
//   - unreachable: a recorded member port is not on the fabric, or could not
//     be read; nothing is proven about it, and OpenSM programs it when it
//     comes back.
package audit
