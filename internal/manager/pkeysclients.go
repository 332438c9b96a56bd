package manager

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// pkeysClientRules are the rules of fabric's [ufm_pkeys:NAME] clients, by
// NAME, for its store rules (store.Rules.PKeysClients).
func pkeysClientRules(cfg *config.Config, fabric string) map[string]store.PKeysClientRules {
	clients := cfg.PKeysClientsOf(fabric)
	if len(clients) == 0 {
		return nil
	}
	out := make(map[string]store.PKeysClientRules, len(clients))
	for _, p := range clients {
		out[p.Name] = store.PKeysClientRules{Range: p.PKeyRange, MaxMembersPerPKey: p.MaxMembersPerPKey,
			MaxMembers: p.MaxMembers, DeleteEmpty: p.DeleteEmpty}
	}
	return out
}

// pkeysClientAPIs are the [ufm_pkeys:NAME] clients' pkeys APIs, each through
// its own view of its fabric's store (store.Store.PKeysClient), and the
// write timeout the slowest answer needs. keys gives a fabric's OpenSM keys,
// for the clients allowed /app/smconf.
func pkeysClientAPIs(cfg *config.Config, db *store.DB, writeTimeout time.Duration, version string,
	keys func(*store.Store) opensm.KeySource) ([]api.PKeysOptions, time.Duration, error) {
	var out []api.PKeysOptions
	for _, p := range cfg.PKeysClients {
		fab := db.Fabric(p.Fabric)
		var view *store.Store
		if fab != nil {
			view = fab.PKeysClient(p.Name)
		}
		if view == nil {
			return nil, 0, fmt.Errorf("%s: the store serves no such client on fabric %q (it serves %v)",
				p.Section(), p.Fabric, db.FabricNames())
		}
		o := api.PKeysOptions{Fabric: p.Fabric, Client: p.Name, Section: p.Section(), Prefix: p.Prefix, Store: view,
			Username: p.Username, Password: p.Password, Token: p.Token, ApplyTimeout: p.ApplyTimeout, Version: version,
			MaxGUIDsPerRequest: p.MaxGUIDsPerRequest, MaxConcurrentRequests: p.MaxConcurrentRequests,
			Quota: quotaOf(p.Quota, cfg.Database.JobRetention, view)}
		for _, f := range cfg.Fabrics {
			if f.Name != p.Fabric {
				continue
			}
			// The ports resource and the hosts API read the fabric's
			// OpenSM's subnet dump, as [ufm_pkeys]'s do (without it
			// they answer 503).
			o.Ports = topology.NewDump(f.OpenSM.SubnetDump())
			if p.SMConf && keys != nil {
				o.SMConf = smconfOf(f, keys(fab))
			}
		}
		writeTimeout = max(writeTimeout, p.ApplyTimeout+api.DefaultDBTimeout+5*time.Second)
		out = append(out, o)
	}
	return out, writeTimeout, nil
}

// OpenSM's own values of the keys /app/smconf reports, where neither a
// hardening group nor [opensm_conf] sets them.
const (
	defaultSubnetPrefix = "0xfe80000000000000"
	defaultMKey         = 0
	defaultSMKey        = 1
	defaultSAKey        = 1
)

// smconfOf answers /app/smconf for fabric f: what its OpenSM runs with. A key a hardening
// group sets is the recorded one (keys); else [opensm_conf]'s, else OpenSM's
// default, so that a client judging the fabric's security is told the truth.
func smconfOf(f config.Fabric, keys opensm.KeySource) func(ctx context.Context) (api.SMConf, error) {
	option := func(name string) (string, bool) {
		for _, kv := range f.OpenSMConf {
			if strings.EqualFold(kv.Key, name) {
				return kv.Value, true
			}
		}
		return "", false
	}
	key := func(group opensm.Group, recorded uint64, name string, def uint64) string {
		if f.OpenSM.Hardening.Has(group) {
			return opensm.FormatKey(recorded)
		}
		if v, ok := option(name); ok {
			if n, err := strconv.ParseUint(v, 0, 64); err == nil {
				return opensm.FormatKey(n)
			}
		}
		return opensm.FormatKey(def)
	}
	return func(ctx context.Context) (api.SMConf, error) {
		k, err := keys.Keys(ctx)
		if err != nil {
			return api.SMConf{}, err
		}
		v := api.SMConf{SubnetPrefix: defaultSubnetPrefix, MKey: key(opensm.GroupMKey, k.MKey, "m_key", defaultMKey),
			SMKey: key(opensm.GroupKeys, k.SMKey, "sm_key", defaultSMKey), SAKey: key(opensm.GroupKeys, k.SAKey, "sa_key", defaultSAKey)}
		if p, ok := option("subnet_prefix"); ok {
			if n, err := strconv.ParseUint(p, 0, 64); err == nil {
				v.SubnetPrefix = fmt.Sprintf("0x%016x", n)
			}
		}
		if p, ok := option("m_key_per_port"); ok {
			v.MKeyPerPort = strings.EqualFold(p, "TRUE")
		}
		return v, nil
	}
}
