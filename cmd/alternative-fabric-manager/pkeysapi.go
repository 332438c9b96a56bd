package main

import (
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// pkeysAPIs are every fabric's pkeys API ([ufm_pkeys], [fabric:NAME:ufm_pkeys]),
// each recorded through its fabric's store view, so that its pkeys, pkey_range
// and limits are its fabric's; and the HTTP write timeout, at least
// writeTimeout, that the slowest of their answers needs (a change is answered
// once applied, up to its apply_timeout). A fabric whose credentials are not
// set serves no route, but its prefix answers 404 saying so.
func pkeysAPIs(cfg *config.Config, st *store.Store, writeTimeout time.Duration) ([]api.PKeysOptions, time.Duration, error) {
	var out []api.PKeysOptions
	for _, f := range cfg.AllFabrics() {
		u := f.UFMPKeys
		o := api.PKeysOptions{Fabric: f.Name, Section: f.UFMPKeysSection(), Prefix: u.Prefix}
		if u.Enabled() {
			view := st.Fabric(f.Name)
			if view == nil {
				return nil, 0, fmt.Errorf("%s: the store serves no fabric %q (it serves %v)", f.UFMPKeysSection(), f.Name, st.FabricNames())
			}
			o.Store, o.Username, o.Password = view, u.Username, u.Password
			o.ApplyTimeout, o.Version = u.ApplyTimeout, versionString()
			o.MaxGUIDsPerRequest, o.MaxConcurrentRequests = u.MaxGUIDsPerRequest, u.MaxConcurrentRequests
			writeTimeout = max(writeTimeout, u.ApplyTimeout+api.DefaultDBTimeout+5*time.Second)
		}
		out = append(out, o)
	}
	return out, writeTimeout, nil
}
