// Package neutronimport is --import-neutron: it reads Neutron's API and
// records, through the store's RecordNetwork and RecordPort (the methods
// networking-mlnx's requests go through, with their rules and jobs), every
// network on the InfiniBand physnets and every port with a client-id that
// Neutron has and the manager lacks; it lists what the manager has and
// Neutron lacks, and removes it only when asked to (Options.Prune).
//
// Connect makes the client from a clouds.yaml cloud, API reads Neutron
// through it, Select reads its listing with the manager's rules, and Import
// compares and records. Report.Neutron.Members() is what Neutron's ports
// claim, by partition key: what adopted members may be released against.
package neutronimport
