package api

import "github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"

// DecodeNetwork reads a Neutron network dictionary (as Neutron's API returns
// it, and as networking-mlnx sends it in a POST) into the network the store
// records: the same reading as the API's, so that a network imported from
// Neutron is recorded as the driver's request would have recorded it.
func DecodeNetwork(raw []byte) (store.NetworkSpec, error) { return decodeNetwork(raw, "") }

// DecodePort reads a Neutron port dictionary into the change the store
// records, as the API reads networking-mlnx's POST of it: its GUID from the
// client-id, its host from binding:host_id.
func DecodePort(raw []byte) (store.PortChange, error) { return decodePort(raw, "") }
