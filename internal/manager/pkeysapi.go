package manager

import (
	"fmt"
	"net/http"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// pkeysAPIs are every fabric's pkeys API ([ufm_pkeys], [fabric:NAME:ufm_pkeys]),
// each recorded through its fabric's store view, so that its pkeys, pkey_range
// and limits are its fabric's; and the HTTP write timeout, at least
// writeTimeout, that the slowest of their answers needs (a change is answered
// once applied, up to its apply_timeout). A fabric whose credentials are not
// set serves no route, but its prefix answers 404 saying so. A fabric with
// a listen address is served there alone (pkeysListeners). Each reports
// version, the binary's.
func pkeysAPIs(cfg *config.Config, db *store.DB, writeTimeout time.Duration, version string) ([]api.PKeysOptions, time.Duration, error) {
	var out []api.PKeysOptions
	for _, f := range cfg.Fabrics {
		u := f.UFMPKeys
		o := api.PKeysOptions{Fabric: f.Name, Section: f.UFMPKeysSection(), Prefix: u.Prefix, OwnListener: u.Listen != ""}
		if u.Enabled() {
			view := db.Fabric(f.Name)
			if view == nil {
				return nil, 0, fmt.Errorf("%s: the store serves no fabric %q (it serves %v)", f.UFMPKeysSection(), f.Name, db.FabricNames())
			}
			o.Store, o.Username, o.Password = view, u.Username, u.Password
			o.ApplyTimeout, o.Version = u.ApplyTimeout, version
			// The ports resource reads the fabric's OpenSM's subnet dump.
			o.Ports = topology.NewDump(f.OpenSM.SubnetDump())
			o.DefaultPartition = f.OpenSM.DefaultPartition
			o.MaxGUIDsPerRequest, o.MaxConcurrentRequests = u.MaxGUIDsPerRequest, u.MaxConcurrentRequests
			o.Quota = quotaOf(u.Quota, cfg.Database.JobRetention, view)
			writeTimeout = max(writeTimeout, u.ApplyTimeout+api.DefaultDBTimeout+5*time.Second)
		}
		out = append(out, o)
	}
	return out, writeTimeout, nil
}

// quotaOf is a principal's quota as configured, its stored bytes counted
// over the jobs' retention, its usage read through usage: the database its
// jobs are in.
func quotaOf(q config.Quota, retention time.Duration, usage api.UsageReader) api.Quota {
	return api.Quota{MaxStoredBytes: int64(q.MaxStoredRequestBytes), MaxJobsPerMinute: q.MaxJobsPerMinute,
		Window: retention, Usage: usage}
}

// pkeysListeners are the listeners of the fabrics whose pkeys API has one of
// its own ([fabric:NAME:ufm_pkeys] listen; the default fabric's [ufm_pkeys]
// has none, it is served on [api] listen): bounded as the API's, over its
// TLS, with its request ids and access log (the API server's handler).
func pkeysListeners(cfg *config.Config, apiServer *api.Server, bounded func(http.Handler) *http.Server,
	certs *tlsreload.Reloader) []*namedServer {
	var out []*namedServer
	for _, f := range cfg.Fabrics {
		if f.UFMPKeys.Listen == "" {
			continue
		}
		srv := bounded(apiServer.PKeysHandler(f.Name))
		if certs != nil {
			srv.TLSConfig = certs.Config()
		}
		out = append(out, &namedServer{name: "pkeys API of fabric " + f.Name, section: f.UFMPKeysSection(),
			key: "listen", addr: f.UFMPKeys.Listen, srv: srv, tls: certs != nil})
	}
	return out
}
