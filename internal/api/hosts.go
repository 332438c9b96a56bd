package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/hostlist"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/hostmap"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// UFM's hosts API, which Slurm's UFM integration calls from its prolog and
// epilog (docs/ufm-clients.md): POST /resources/pkeys/hosts puts the ports
// of the hosts a hostlist names in a pkey, DELETE
// /resources/pkeys/<pkey>/hosts/<hostlist> takes them out. A host name is
// resolved through the hosts an operator confirmed alone (hostmap): a node
// description is the tenant's to set. Each is then a pkeys change like any
// other, the same store path, rules and answer as a POST of GUIDs.

// hostsRoutes serves the hosts API under the pkeys API's prefix.
func (pk *pkeysAPI) hostsRoutes(handle func(method, path, route string, h httprouter.Handle)) {
	p := pk.o.Prefix
	handle(http.MethodPost, p+"/resources/pkeys/hosts", "ufm/resources/pkeys/hosts", pk.basicAuth(pk.slot(pk.change(pk.addHosts))))
	handle(http.MethodDelete, p+"/resources/pkeys/:pkey/hosts/:hosts", "ufm/resources/pkeys/:pkey/hosts/:hosts",
		pk.basicAuth(pk.slot(pk.change(pk.removeHosts))))
}

// hostsBody is a POST of /resources/pkeys/hosts. Slurm's integration sends
// ip_over_ib and index0 as strings when its configuration sets them.
type hostsBody struct {
	PKey       *string    `json:"pkey"`
	HostsNames *string    `json:"hosts_names"`
	Membership *string    `json:"membership"`
	Index0     *looseBool `json:"index0"`
	IPoIB      *looseBool `json:"ip_over_ib"`
}

// looseBool is a JSON boolean, or a string of one as Slurm's integration
// writes them ("true", "True", "t", "TRUE"; "false", "False", "f", "FALSE").
type looseBool bool

func (b *looseBool) UnmarshalJSON(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	switch v {
	case true, "true", "True", "TRUE", "t", "T":
		*b = true
	case false, "false", "False", "FALSE", "f", "F":
		*b = false
	default:
		return fmt.Errorf("%s: want true or false", raw)
	}
	return nil
}

// addHosts puts the confirmed ports of the hosts hosts_names names in the
// pkey, as a POST of their GUIDs would.
func (pk *pkeysAPI) addHosts(r *http.Request, _ httprouter.Params) (int, any, error) {
	var body hostsBody
	raw, pkey, err := readPKeyRequest(r, &body)
	if err != nil {
		return 0, nil, err
	}
	if body.HostsNames == nil {
		return 0, nil, badRequest(`"hosts_names" is missing: want a Slurm hostlist or a comma list, such as "node[01-04,07]"`)
	}
	membership := fabric.Full // UFM's default
	if body.Membership != nil {
		if membership, err = parseMembership(*body.Membership); err != nil {
			return 0, nil, err
		}
	}
	guids, err := pk.resolveHosts(r.Context(), *body.HostsNames, true)
	if err != nil {
		return 0, nil, err
	}
	a := store.KubernetesAddition{PKey: pkey, CreatedBy: pk.o.creator(), Request: raw, RequestID: RequestID(r.Context())}
	if body.IPoIB != nil {
		a.IPoIB = ptr(bool(*body.IPoIB))
	}
	for _, g := range guids {
		a.Members = append(a.Members, store.KubernetesMember{GUID: g, Membership: membership,
			Index0: body.Index0 != nil && bool(*body.Index0)})
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		return pk.o.Store.AddKubernetesGUIDs(ctx, a)
	})
}

// removeHosts takes the confirmed ports of the hosts the path names out of
// the pkey, as remove_guids_from_pkey would. A host the last sweep puts in
// doubt is not refused here: taking its confirmed ports out of a partition
// gives no one anything, and refusing would leave a finished job's hosts in
// its partition.
func (pk *pkeysAPI) removeHosts(r *http.Request, ps httprouter.Params) (int, any, error) {
	pkey, err := parsePKey(ps.ByName("pkey"))
	if err != nil {
		return 0, nil, err
	}
	guids, err := pk.resolveHosts(r.Context(), ps.ByName("hosts"), false)
	if err != nil {
		return 0, nil, err
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		return pk.o.Store.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: pkey, GUIDs: guids,
			CreatedBy: pk.o.creator(), Request: r.Method + " " + r.URL.Path, RequestID: RequestID(r.Context())})
	})
}

// resolveHosts expands a hostlist and returns the confirmed ports of its
// hosts: 400 naming a host that is not confirmed, and, with check, a host
// OpenSM's last sweep puts in doubt (hostmap.Check); 503 when the sweep
// cannot be read to check it.
func (pk *pkeysAPI) resolveHosts(ctx context.Context, list string, check bool) ([]fabric.GUID, error) {
	names, err := hostlist.Expand(list, pk.maxGUIDs())
	if err != nil {
		return nil, badRequest("hosts_names: %v", err)
	}
	dctx, cancel := pk.srv.dbCtx(ctx)
	confirmed, err := pk.o.Store.ConfirmedHosts(dctx)
	cancel()
	if err != nil {
		return nil, err
	}
	m := hostmap.New(confirmed)
	if m.Empty() {
		return nil, badRequest("no host of this fabric is confirmed: an operator records them with --confirm-hosts " +
			"once OpenSM has swept, and the hosts API names no other")
	}
	guids, err := m.Ports(names)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if check {
		live, err := pk.liveHostPorts()
		if err != nil {
			return nil, err
		}
		if err := m.Check(names, live); err != nil {
			return nil, badRequest("%v", err)
		}
	}
	return guids, pk.checkGUIDCount(len(guids))
}

// liveHostPorts are the host ports of OpenSM's last sweep with the names
// their descriptions give: 503 when there is no sweep to read.
func (pk *pkeysAPI) liveHostPorts() ([]topology.NamedPort, error) {
	if pk.o.Ports == nil {
		return nil, &httpError{http.StatusServiceUnavailable, "the fabric's hosts cannot be checked: no subnet dump to read"}
	}
	top, err := pk.o.Ports.Load()
	if err != nil {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("the fabric's hosts cannot be checked against "+
			"OpenSM's last sweep yet: %v", err)}
	}
	return top.HostPortNames(), nil
}

// maxGUIDs is MaxGUIDsPerRequest, or its default.
func (pk *pkeysAPI) maxGUIDs() int {
	if pk.o.MaxGUIDsPerRequest > 0 {
		return pk.o.MaxGUIDsPerRequest
	}
	return DefaultMaxGUIDsPerRequest
}
