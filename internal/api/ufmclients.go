package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The calls of UFM's REST API that its other clients make beside
// ib-kubernetes' (docs/ufm-clients.md): NVIDIA's NICo reads the fabric's
// host ports, the UFM SDK's pkeys tool sets a pkey's members with PUT and
// deletes GUIDs by path. Every change goes the way of ib-kubernetes' POST:
// the same store path, obligations, proof and gates, answered after the apply
// or after apply_timeout.

// PortSource is where the ports resource reads the fabric's ports: OpenSM's
// subnet dump (topology.Dump).
type PortSource interface {
	Load() (*topology.Topology, error)
}

// clientRoutes serves the other clients' calls under the pkeys API's prefix.
func (pk *pkeysAPI) clientRoutes(handle func(method, path, route string, h httprouter.Handle)) {
	p := pk.o.Prefix
	handle(http.MethodGet, p+"/resources/ports", "ufm/resources/ports", pk.basicAuth(pk.listPorts))
	handle(http.MethodGet, p+"/resources/ports/:port", "ufm/resources/ports/:port", pk.basicAuth(pk.getPort))
	handle(http.MethodPut, p+"/resources/pkeys", "ufm/resources/pkeys", pk.basicAuth(pk.slot(pk.change(pk.setGUIDs))))
	handle(http.MethodDelete, p+"/resources/pkeys/:pkey/guids/:guids", "ufm/resources/pkeys/:pkey/guids/:guids",
		pk.basicAuth(pk.slot(pk.change(pk.deleteGUIDs))))
	pk.hostsRoutes(handle)
}

// portView is one port as UFM's ports resource lists it.
type portView struct {
	GUID          string `json:"guid"`
	Name          string `json:"name"`
	Number        int    `json:"number"`
	SystemID      string `json:"systemID"`
	LID           int    `json:"lid"`
	DName         string `json:"dname"`
	SystemName    string `json:"system_name"`
	Description   string `json:"node_description"`
	Type          string `json:"type"`
	PhysicalState string `json:"physical_state"`
	LogicalState  string `json:"logical_state"`
}

// logicalStates are UFM's words for the link states OpenSM's dump writes.
var logicalStates = map[string]string{"ACT": "Active", "ARM": "Armed", "INI": "Initialize", "DWN": "Down"}

// sysTypes are the sys_type values a ports read filters by, and the node
// types of the dump each lists.
var sysTypes = map[string]string{"computer": "CA", "switch": "SW", "router": "Rt"}

// viewPort is p as UFM lists it. A host's NodeDescription is "<host name>
// <device>" by convention: its first word is the system's name, the rest
// names the device, and dname is the device and the port number. A port is in
// the dump only while its link is up: its physical state is Link Up.
func viewPort(p topology.Port) portView {
	guid := fmt.Sprintf("%016x", uint64(p.GUID))
	host, device, _ := strings.Cut(p.Description, " ")
	dname := fmt.Sprint(p.Number)
	if device != "" {
		dname = device + "/" + dname
	}
	typ := map[string]string{"CA": "Computer", "SW": "Switch", "Rt": "Router"}[p.Kind]
	state, ok := logicalStates[p.LinkState]
	if !ok {
		state = p.LinkState
	}
	return portView{GUID: guid, Name: fmt.Sprintf("%s_%d", guid, p.Number), Number: p.Number,
		SystemID: fmt.Sprintf("%016x", uint64(p.SystemGUID)), LID: int(p.LID), DName: dname, SystemName: host,
		Description: p.Description, Type: cmp.Or(typ, "Unknown"), PhysicalState: "Link Up", LogicalState: state}
}

// fabricPorts reads the fabric's ports from OpenSM's last subnet dump: 503
// when there is none to read (OpenSM has not swept, or the pkeys API has no
// dump to read).
func (pk *pkeysAPI) fabricPorts() ([]topology.Port, error) {
	if pk.o.Ports == nil {
		return nil, &httpError{http.StatusServiceUnavailable, "the fabric's ports are not known: no subnet dump to read"}
	}
	top, err := pk.o.Ports.Load()
	if err != nil {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("the fabric's ports are not known yet: %v", err)}
	}
	return top.Ports(), nil
}

// listPorts answers the fabric's ports; sys_type=Computer lists the hosts'
// (channel adapters') alone, Switch the switches', Router the routers'.
func (pk *pkeysAPI) listPorts(r *http.Request, _ httprouter.Params) (int, any, error) {
	kind := ""
	if v := r.URL.Query().Get("sys_type"); v != "" {
		var ok bool
		if kind, ok = sysTypes[strings.ToLower(v)]; !ok {
			return 0, nil, badRequest("sys_type=%q: want Computer, Switch or Router", v)
		}
	}
	ports, err := pk.fabricPorts()
	if err != nil {
		return 0, nil, err
	}
	out := []portView{}
	for _, p := range ports {
		if kind == "" || p.Kind == kind {
			out = append(out, viewPort(p))
		}
	}
	return http.StatusOK, out, nil
}

// getPort answers one port, by its name (<guid>_<number>) or by its GUID (a
// host port's; a switch's ports share its GUID, so they are read by name);
// 404 when the fabric has none.
func (pk *pkeysAPI) getPort(r *http.Request, ps httprouter.Params) (int, any, error) {
	name := strings.ToLower(ps.ByName("port"))
	ports, err := pk.fabricPorts()
	if err != nil {
		return 0, nil, err
	}
	var found []portView
	for _, p := range ports {
		if v := viewPort(p); v.Name == name || v.GUID == strings.TrimPrefix(name, "0x") {
			found = append(found, v)
		}
	}
	switch len(found) {
	case 0:
		return 0, nil, notFound("no port %q on the fabric (as OpenSM's last sweep found it)", ps.ByName("port"))
	case 1:
		return http.StatusOK, found[0], nil
	}
	return 0, nil, badRequest("%d ports have GUID %s (a switch's): name one as <guid>_<port number>, such as %q",
		len(found), found[0].GUID, found[0].Name)
}

// setGUIDs is UFM's PUT of /resources/pkeys: the GUIDs listed become the
// pkey's only members, with membership (one for all) or memberships (one per
// GUID); the pkey is created if needed.
func (pk *pkeysAPI) setGUIDs(r *http.Request, _ httprouter.Params) (int, any, error) {
	return pk.recordAddition(r, true)
}

// deleteGUIDs is UFM's DELETE of /resources/pkeys/<pkey>/guids/<guid,...>:
// the GUIDs leave the pkey, as remove_guids_from_pkey's.
func (pk *pkeysAPI) deleteGUIDs(r *http.Request, ps httprouter.Params) (int, any, error) {
	list := strings.Split(ps.ByName("guids"), ",")
	if err := pk.checkGUIDCount(len(list)); err != nil {
		return 0, nil, err
	}
	pkey, guids, err := pkeyAndGUIDs(ptr(ps.ByName("pkey")), list)
	if err != nil {
		return 0, nil, err
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		return pk.o.Store.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: pkey, GUIDs: guids,
			CreatedBy: pk.o.creator(), Request: r.Method + " " + r.URL.Path, RequestID: RequestID(r.Context())})
	})
}

func ptr[T any](v T) *T { return &v }

// maxPartitionName is the longest partition_name recorded: OpenSM's
// partition names are as short.
const maxPartitionName = 64

// partitionName checks a partition_name: 1 to 64 letters, digits, '_', '-'
// or '.', so that it reads back as it was given, in any client's log. It is
// what the pkey's reads return; the partitions file names the partition by
// its pkey (k8s-<pkey>) whatever it is.
func partitionName(name string) (string, error) {
	if name == "" || len(name) > maxPartitionName || strings.Trim(name, partitionNameChars) != "" {
		return "", badRequest("partition_name %q: want 1 to %d letters, digits, '_', '-' or '.'", name, maxPartitionName)
	}
	return name, nil
}

const partitionNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."

// The default partition, 0x7fff, is the configuration's (the partitions
// template writes it): every pkeys read lists it, as UFM does, and NICo reads
// it to learn that hosts are its limited members; no change through the API
// may touch it (the store refuses it with the reason).

// defaultPartitionName is the default partition's name in UFM's reads.
const defaultPartitionName = "management"

// defaultPartition is what the reads say of the default partition: whether
// it carries IPoIB, and the membership every port has in it.
type defaultPartition struct {
	ipoib      bool
	membership fabric.Membership
	qos        fabric.QoS // what OpenSM applies to its IPoIB group (its flags, or OpenSM's defaults)
}

// defaultPartitionOf reads the default partition's statement as configured
// ([opensm] default_partition, which the partitions file holds as is): its
// ipoib flag, and the membership its last ALL or ALL_CAS member gives every
// host port (a later member wins in OpenSM). A line that does not parse (the
// configuration refuses it) or gives hosts no membership reads as the
// shipped one's: IPoIB, limited.
func defaultPartitionOf(line string) defaultPartition {
	d := defaultPartition{ipoib: true, membership: fabric.Limited, qos: fabric.OpenSMGroupQoS}
	f, err := partitions.Parse([]byte(line))
	if err != nil || len(f.Statements) != 1 || f.Statements[0].PKey != fabric.DefaultPKey {
		return d
	}
	st := f.Statements[0]
	d.ipoib = slices.ContainsFunc(st.Flags, func(f partitions.Flag) bool { return f.Name == "ipoib" })
	d.qos = qosOfFlags(st.Flags)
	for _, m := range st.Members {
		if m.Keyword == partitions.All || m.Keyword == partitions.AllCAs {
			d.membership = fabric.Membership(m.Membership)
		}
	}
	return d
}

// defaultPKeyView is the default partition as a pkeys read answers it.
func (pk *pkeysAPI) defaultPKeyView(withGUIDs, withQoS bool) pkeyView {
	d := defaultPartitionOf(pk.o.DefaultPartition)
	v := pkeyView{PKey: fabric.DefaultPKey.String(), Partition: defaultPartitionName, IPoIB: d.ipoib,
		Membership: string(d.membership)}
	if withGUIDs {
		v.GUIDs, v.Index0 = &[]guidEntry{}, ptr(false)
	}
	if withQoS {
		v.QoSConf = viewQoS(d.qos)
	}
	return v
}

// qosOfFlags is what OpenSM applies to a partition with these flags: their
// mtu=, rate= and sl=, OpenSM's defaults for those absent (without qos TRUE
// OpenSM forces sl= to 0, which the default partition's line seldom has).
func qosOfFlags(flags []partitions.Flag) fabric.QoS {
	code := map[string]int{}
	for _, f := range flags {
		if v, err := strconv.Atoi(f.Value); err == nil && (f.Name == "mtu" || f.Name == "rate" || f.Name == "sl") {
			code[f.Name] = v
		}
	}
	return fabric.QoSOfCodes(code["mtu"], code["rate"], code["sl"])
}
