package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The pkeys API: the part of UFM's REST API that Kubernetes' ib-kubernetes
// (its "ufm" plugin) uses to give pods' GUIDs their partitions. Unlike
// networking-mlnx's, it has no jobs: a change is answered 200 once it is
// applied, so a change waits here for the sweep that proves it, for at most
// PKeysOptions.ApplyTimeout, and is answered 200 after that anyway (it is
// recorded and will be applied; last_updated moves only once it is).
// ib-kubernetes retries whatever is not 200, so a refusal (400) says why, and
// an unreachable database is 503 as everywhere else.

// PKeyStore is what the pkeys API needs of the store.
type PKeyStore interface {
	AddKubernetesGUIDs(ctx context.Context, a store.KubernetesAddition) (store.Job, error)
	RemoveKubernetesGUIDs(ctx context.Context, r store.KubernetesRemoval) (store.Job, error)
	DeleteKubernetesPKey(ctx context.Context, d store.KubernetesDeletion) (store.Job, error)
	CreateKubernetesPKey(ctx context.Context, c store.KubernetesCreation) (store.Job, error)
	SetKubernetesQoS(ctx context.Context, q store.KubernetesQoS) (store.Job, error)
	KubernetesPKeys(ctx context.Context) ([]store.KubernetesPKey, error)
	GetKubernetesPKey(ctx context.Context, pkey fabric.PKey) (store.KubernetesPKey, error)
	KubernetesLastUpdated(ctx context.Context) (*time.Time, error)
	GetJob(ctx context.Context, id int64) (store.Job, error)
	// ConfirmedHosts are the hosts the hosts API resolves names through
	// (hosts.go).
	ConfirmedHosts(ctx context.Context) ([]store.ConfirmedHost, error)
}

// PKeysOptions are one pkeys client's API: [ufm_pkeys] for the default
// fabric's ib-kubernetes, [fabric:NAME:ufm_pkeys] for a further fabric's,
// [ufm_pkeys:NAME] for a further client (Client).
type PKeysOptions struct {
	// Fabric is the fabric whose pkeys these are, as Credentials.PKeys and
	// the log name it; "": the default fabric.
	Fabric string
	// Section is the configuration section of these settings, as refusals
	// name it; "": [ufm_pkeys].
	Section string
	// Store serves the routes: the fabric's store view, which records in the
	// fabric and by its rules (pkey_range, max_members...); nil: they are not
	// served (404).
	Store PKeyStore
	// Prefix is UFM's path prefix, /ufmRest.
	Prefix string
	// Username and Password are what ib-kubernetes sends as Basic auth.
	Username, Password string
	// ApplyTimeout bounds a change's wait for its apply; 0: DefaultApplyTimeout.
	ApplyTimeout time.Duration
	// PollInterval is how often a waiting change reads its job; 0:
	// DefaultApplyPoll.
	PollInterval time.Duration
	// Version is ufm_version's ufm_release_version.
	Version string
	// Ports are the fabric's ports the ports resource lists: OpenSM's
	// subnet dump; nil: the resource answers 503.
	Ports PortSource
	// DefaultPartition is the fabric's [opensm] default_partition, what the
	// reads say of the default partition 0x7fff; "": the shipped one.
	DefaultPartition string
	// MaxGUIDsPerRequest bounds the GUIDs of one request (413 beyond it); 0:
	// DefaultMaxGUIDsPerRequest.
	MaxGUIDsPerRequest int
	// MaxConcurrentRequests bounds the requests of this fabric that read or
	// change the database at once, a change's wait for its apply included;
	// the next is answered 503 at once. 0: DefaultMaxConcurrentRequests.
	MaxConcurrentRequests int
	// Client is the [ufm_pkeys:NAME] client's NAME these settings are; "":
	// the fabric's [ufm_pkeys] (ib-kubernetes). Clients are told apart by
	// their credentials: several may share a prefix (principals.go).
	Client string
	// Token is what a [ufm_pkeys:NAME] client sends as "Authorization: Basic
	// <token>" (UFM's token auth), beside or instead of Username and
	// Password.
	Token string
	// SMConf answers /app/smconf: OpenSM's keys, for a client whose section
	// allows it (smconf = true); nil answers 403.
	SMConf func(ctx context.Context) (SMConf, error)
	// Quota bounds what this client may store (quota.go); the zero Quota
	// bounds nothing.
	Quota Quota
	// OwnListener serves the routes on the fabric's own listener alone
	// (Server.PKeysHandler), not beside the others: there its Prefix may be
	// /ufmRest, the one prefix ib-kubernetes sends, which another fabric's
	// routes may hold on the API's listener.
	OwnListener bool
}

// fabric is the name the fabric's credentials are known by.
func (o PKeysOptions) fabric() string { return cmp.Or(o.Fabric, store.DefaultFabric) }

// section is the configuration section refusals name.
func (o PKeysOptions) section() string { return cmp.Or(o.Section, "[ufm_pkeys]") }

// Principal is who o's credentials are of (Credentials.PKeys' key): the
// fabric's name for its [ufm_pkeys], "ufm_pkeys:NAME" for a [ufm_pkeys:NAME]
// client, which no fabric's name can be.
func (o PKeysOptions) Principal() string {
	if o.Client == "" {
		return o.fabric()
	}
	return "ufm_pkeys:" + o.Client
}

// creator is who o's jobs are created by: ib-kubernetes for [ufm_pkeys],
// "ufm_pkeys:NAME" for a client, which networking-mlnx's and ib-kubernetes'
// names cannot be, so that no client reads another's jobs.
func (o PKeysOptions) creator() string {
	if o.Client == "" {
		return kubernetesPrincipal
	}
	return o.Principal()
}

// pkeysPrefixOf returns the pkeys API whose prefix path is under: a served
// one rather than one that is off (whose prefix may be a default that
// another's repeats).
func pkeysPrefixOf(list []PKeysOptions, path string) (PKeysOptions, bool) {
	var off *PKeysOptions
	for i, o := range list {
		if o.OwnListener || o.Prefix == "" || !strings.HasPrefix(path, o.Prefix+"/") {
			continue
		}
		if o.Store != nil {
			return o, true
		}
		if off == nil {
			off = &list[i]
		}
	}
	if off == nil {
		return PKeysOptions{}, false
	}
	return *off, true
}

// PKeysOptions' defaults.
const (
	DefaultApplyTimeout          = 30 * time.Second
	DefaultApplyPoll             = 100 * time.Millisecond
	DefaultMaxGUIDsPerRequest    = 10000
	DefaultMaxConcurrentRequests = 4
)

// Starvation. networking-mlnx's changes and Kubernetes' share the database,
// its connections and, on one fabric, the revision's lock. Kubernetes' side
// is bounded so that networking-mlnx's never wait long for it: a request
// holds at most MaxGUIDsPerRequest GUIDs (their checks hold the lock), at
// most MaxConcurrentRequests of a fabric are served at once (each holds a
// connection at a time and polls its job while it waits), the next is
// answered 503 with Retry-After at once instead of queueing, and the store
// commits each Kubernetes change in a lane of its own (store's group.go).
// networking-mlnx's requests take no slot: they never wait for these. Each
// fabric's pkeys API has slots of its own, so that one fabric's
// ib-kubernetes never holds another's off; the connections they may hold
// together are the sum of the fabrics' bounds.

// kubernetesPrincipal is who creates the jobs of this API.
const kubernetesPrincipal = "ib-kubernetes"

// lastUpdatedLayout is last_updated's form: date(1)'s, in UTC, which
// ib-kubernetes reads with its time zone.
const lastUpdatedLayout = time.UnixDate

// pkeysAPI is one fabric's pkeys API: its settings and store view, and a
// token for each of its requests being served (MaxConcurrentRequests).
type pkeysAPI struct {
	srv   *Server
	o     PKeysOptions
	slots chan struct{}
}

func newPKeysAPI(srv *Server, o PKeysOptions) *pkeysAPI {
	slots := o.MaxConcurrentRequests
	if slots <= 0 {
		slots = DefaultMaxConcurrentRequests
	}
	return &pkeysAPI{srv: srv, o: o, slots: make(chan struct{}, slots)}
}

// routes serves the API under its prefix. Routes are named as on every
// fabric, for metrics: the access log names the fabric.
func (pk *pkeysAPI) routes(handle func(method, path, route string, h httprouter.Handle)) {
	p := pk.o.Prefix
	handle(http.MethodGet, p+"/app/ufm_version", "ufm/app/ufm_version", pk.basicAuth(pk.ufmVersion))
	handle(http.MethodHead, p+"/app/ufm_version", "ufm/app/ufm_version", pk.basicAuth(pk.ufmVersion))
	handle(http.MethodGet, p+"/app/smconf", "ufm/app/smconf", pk.basicAuth(pk.slot(pk.smconf)))
	handle(http.MethodGet, p+"/resources/pkeys", "ufm/resources/pkeys", pk.basicAuth(pk.slot(pk.listPKeys)))
	handle(http.MethodGet, p+"/resources/pkeys/", "ufm/resources/pkeys", pk.basicAuth(pk.slot(pk.listPKeys)))
	handle(http.MethodPost, p+"/resources/pkeys", "ufm/resources/pkeys", pk.basicAuth(pk.slot(pk.change(pk.addGUIDs))))
	handle(http.MethodPost, p+"/resources/pkeys/add", "ufm/resources/pkeys/add", pk.basicAuth(pk.slot(pk.change(pk.createPKey))))
	handle(http.MethodPut, p+"/resources/pkeys/qos_conf", "ufm/resources/pkeys/qos_conf", pk.basicAuth(pk.slot(pk.change(pk.setQoS))))
	handle(http.MethodGet, p+"/resources/pkeys/:pkey", "ufm/resources/pkeys/:pkey", pk.basicAuth(pk.slot(pk.getPKey)))
	handle(http.MethodDelete, p+"/resources/pkeys/:pkey", "ufm/resources/pkeys/:pkey", pk.basicAuth(pk.slot(pk.change(pk.deletePKey))))
	handle(http.MethodPost, p+"/actions/remove_guids_from_pkey", "ufm/actions/remove_guids_from_pkey",
		pk.basicAuth(pk.slot(pk.change(pk.removeGUIDs))))
	// UFM's job path: a change answered before it was applied names its job.
	handle(http.MethodGet, p+"/jobs/:id", "ufm/jobs/:id", pk.basicAuth(pk.getKubernetesJob))
	pk.clientRoutes(handle)
}

// change runs h, a change, unless this client is over its quota
// (quota.go). Its principal, as the metric names it, is its section.
func (pk *pkeysAPI) change(h handlerFunc) handlerFunc {
	return pk.srv.limited(quotaCheck{quota: pk.o.Quota, createdBy: pk.o.creator(),
		principal: strings.Trim(pk.o.section(), "[]"), section: pk.o.section()}, h)
}

// slot runs h if a slot is free (see Starvation), and answers 503 with
// Retry-After at once otherwise: a request that queued here would hold its
// connection and the client's patience for nothing, and ib-kubernetes
// retries what is not 200.
func (pk *pkeysAPI) slot(h handlerFunc) handlerFunc {
	return func(r *http.Request, ps httprouter.Params) (int, any, error) {
		select {
		case pk.slots <- struct{}{}:
		default:
			return 0, nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("%d pkeys requests are being served, "+
				"the most at once (%s max_concurrent_requests): retry later", cap(pk.slots), pk.o.section())}
		}
		defer func() { <-pk.slots }()
		return h(r, ps)
	}
}

// guidList is a body that lists GUIDs: addBody, removeBody.
type guidList interface {
	addBody | removeBody
	guidCount() int
}

func (b addBody) guidCount() int    { return len(b.GUIDs) }
func (b removeBody) guidCount() int { return len(b.GUIDs) }

// readGUIDsBody reads a body that lists GUIDs (readStrict), refusing more
// of them than a request may carry (checkGUIDCount) before any is parsed.
func readGUIDsBody[B guidList](pk *pkeysAPI, r *http.Request) (B, string, error) {
	var body B
	raw, err := readStrict(r, &body)
	if err != nil {
		return body, "", err
	}
	return body, raw, pk.checkGUIDCount(body.guidCount())
}

// checkGUIDCount answers 413 when a request lists more GUIDs than
// MaxGUIDsPerRequest.
func (pk *pkeysAPI) checkGUIDCount(n int) error {
	most := pk.o.MaxGUIDsPerRequest
	if most <= 0 {
		most = DefaultMaxGUIDsPerRequest
	}
	if n > most {
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("%d GUIDs in one request: at most %d "+
			"(%s max_guids_per_request); send them in several", n, most, pk.o.section())}
	}
	return nil
}

// basicAuth checks HTTP Basic auth against this fabric's username and
// password in constant time (hashes, so the length does not show either;
// both are compared whatever the first gives), then runs h. Its database
// calls take their deadlines one by one (dbCtx): a change waits for its apply
// longer than any one of them may take.
func (pk *pkeysAPI) basicAuth(h handlerFunc) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if info := infoOf(r); info != nil {
			info.fabric = pk.o.fabric()
		}
		if !pk.srv.creds.Load().pkeysOK(r, pk.o.Principal()) {
			w.Header().Set("WWW-Authenticate", `Basic realm="ufm pkeys"`)
			writeError(w, http.StatusUnauthorized, pk.o.unauthorized())
			return
		}
		status, body, err := h(r, ps)
		if err != nil {
			pk.srv.fail(w, r, err)
			return
		}
		writeJSON(w, status, body)
	}
}

// dbCtx bounds one database call of a pkeys request.
func (s *Server) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := s.opts.DBTimeout
	if timeout <= 0 {
		timeout = DefaultDBTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

func (pk *pkeysAPI) ufmVersion(*http.Request, httprouter.Params) (int, any, error) {
	return http.StatusOK, map[string]string{"ufm_release_version": pk.o.Version}, nil
}

// addBody is a POST of /resources/pkeys.
type addBody struct {
	PKey        *string  `json:"pkey"`
	GUIDs       []string `json:"guids"`
	Membership  *string  `json:"membership"`
	Memberships []string `json:"memberships"`
	Index0      *bool    `json:"index0"`
	IPoIB       *bool    `json:"ip_over_ib"`
	// PartitionName is the name the client gives the pkey, which reads
	// return as its partition (partitionName).
	PartitionName *string `json:"partition_name"`
	qosFields
}

// createBody is a POST of /resources/pkeys/add, with UFM's QoS fields
// (qos.go).
type createBody struct {
	PKey  *string `json:"pkey"`
	IPoIB *bool   `json:"ip_over_ib"`
	qosFields
}

// removeBody is a POST of /actions/remove_guids_from_pkey.
type removeBody struct {
	PKey  *string  `json:"pkey"`
	GUIDs []string `json:"guids"`
}

func (pk *pkeysAPI) addGUIDs(r *http.Request, _ httprouter.Params) (int, any, error) {
	return pk.recordAddition(r, false)
}

// recordAddition records the addition r's body asks for, as the calling
// client's change, and answers after its apply. With replace, the GUIDs
// listed become the pkey's only members (UFM's PUT).
func (pk *pkeysAPI) recordAddition(r *http.Request, replace bool) (int, any, error) {
	body, raw, err := readGUIDsBody[addBody](pk, r)
	if err != nil {
		return 0, nil, err
	}
	a, err := body.addition()
	if err != nil {
		return 0, nil, err
	}
	a.Replace = replace
	a.CreatedBy, a.Request, a.RequestID = pk.o.creator(), raw, RequestID(r.Context())
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		return pk.o.Store.AddKubernetesGUIDs(ctx, a)
	})
}

// addition checks the body and turns it into the change to record.
func (b addBody) addition() (store.KubernetesAddition, error) {
	pkey, guids, err := pkeyAndGUIDs(b.PKey, b.GUIDs)
	if err != nil {
		return store.KubernetesAddition{}, err
	}
	memberships := make([]fabric.Membership, len(guids))
	switch {
	case b.Membership != nil && b.Memberships != nil:
		return store.KubernetesAddition{}, badRequest("give membership (one for every GUID) or memberships (one per GUID), not both")
	case b.Memberships != nil && len(b.Memberships) != len(guids):
		return store.KubernetesAddition{}, badRequest("memberships has %d entries for %d GUIDs: want one per GUID, in the same order",
			len(b.Memberships), len(guids))
	}
	for i := range memberships {
		word := string(fabric.Full) // UFM's default
		switch {
		case b.Memberships != nil:
			word = b.Memberships[i]
		case b.Membership != nil:
			word = *b.Membership
		}
		m, err := parseMembership(word)
		if err != nil {
			return store.KubernetesAddition{}, err
		}
		memberships[i] = m
	}
	qos, err := b.change()
	if err != nil {
		return store.KubernetesAddition{}, err
	}
	a := store.KubernetesAddition{PKey: pkey, IPoIB: b.IPoIB, QoS: qos}
	if b.PartitionName != nil {
		if a.PartitionName, err = partitionName(*b.PartitionName); err != nil {
			return store.KubernetesAddition{}, err
		}
	}
	for i, g := range guids {
		a.Members = append(a.Members, store.KubernetesMember{GUID: g, Membership: memberships[i],
			Index0: b.Index0 != nil && *b.Index0})
	}
	return a, nil
}

// createPKey creates an empty pkey (ip_over_ib true unless false): the
// limited partition ib-kubernetes adds pods to must exist before it does.
func (pk *pkeysAPI) createPKey(r *http.Request, _ httprouter.Params) (int, any, error) {
	var body createBody
	raw, pkey, err := readPKeyRequest(r, &body)
	if err != nil {
		return 0, nil, err
	}
	qos, err := body.change()
	if err != nil {
		return 0, nil, err
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		return pk.o.Store.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: pkey,
			IPoIB: body.IPoIB == nil || *body.IPoIB, QoS: qos, CreatedBy: pk.o.creator(), Request: raw, RequestID: RequestID(r.Context())})
	})
}

func (pk *pkeysAPI) removeGUIDs(r *http.Request, _ httprouter.Params) (int, any, error) {
	body, raw, err := readGUIDsBody[removeBody](pk, r)
	if err != nil {
		return 0, nil, err
	}
	pkey, guids, err := pkeyAndGUIDs(body.PKey, body.GUIDs)
	if err != nil {
		return 0, nil, err
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		return pk.o.Store.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: pkey, GUIDs: guids,
			CreatedBy: pk.o.creator(), Request: raw, RequestID: RequestID(r.Context())})
	})
}

func (pk *pkeysAPI) deletePKey(r *http.Request, ps httprouter.Params) (int, any, error) {
	pkey, err := parsePKey(ps.ByName("pkey"))
	if err != nil {
		return 0, nil, err
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		job, err := pk.o.Store.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: pkey,
			CreatedBy: pk.o.creator(), Request: r.Method + " " + r.URL.Path, RequestID: RequestID(r.Context())})
		if isNotFound(err) {
			return job, notFound("pkey %s is not a Kubernetes partition", pkey)
		}
		return job, err
	})
}

// recordAndAwait records a change with the database's deadline (record),
// then answers once OpenSM has applied it (see awaitApply).
func (pk *pkeysAPI) recordAndAwait(r *http.Request, record func(ctx context.Context) (store.Job, error)) (int, any, error) {
	ctx, cancel := pk.srv.dbCtx(r.Context())
	job, err := record(ctx)
	cancel()
	if err != nil {
		return 0, nil, err
	}
	return pk.awaitApply(r, job)
}

// appliedView answers a change: its job as UFM's job object, whether OpenSM
// was seen applying it, and what is true once it is.
type appliedView struct {
	Applied bool    `json:"applied"`
	Message string  `json:"message"`
	Job     jobView `json:"job"`
}

// awaitApply waits until the change's job has completed (OpenSM applied it),
// failed, or ApplyTimeout passed, and answers: 200 unless it failed. A
// database error while waiting only ends the wait at the timeout: the change
// is recorded either way.
func (pk *pkeysAPI) awaitApply(r *http.Request, job store.Job) (int, any, error) {
	if info := infoOf(r); info != nil {
		info.job, info.jobCreated = job.ID, job.CreatedAt
	}
	o := pk.o
	timeout, poll := o.ApplyTimeout, o.PollInterval
	if timeout <= 0 {
		timeout = DefaultApplyTimeout
	}
	if poll <= 0 {
		poll = DefaultApplyPoll
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for job.Status != store.StatusCompleted && job.Status != store.StatusFailed {
		select {
		case <-r.Context().Done():
			return 0, nil, r.Context().Err()
		case <-deadline.C:
			return http.StatusOK, appliedView{Message: fmt.Sprintf("recorded as job %d, not yet seen applied after %s: "+
				"it will be; last_updated moves once it is", job.ID, timeout), Job: viewJob(job)}, nil
		case <-tick.C:
		}
		ctx, cancel := pk.srv.dbCtx(r.Context())
		j, err := o.Store.GetJob(ctx, job.ID)
		cancel()
		if err != nil {
			pk.srv.logger(r).Warn("read the job of a pkeys change", "job", job.ID, "error", err)
			continue
		}
		job = j
	}
	if job.Status == store.StatusFailed {
		return 0, nil, &httpError{http.StatusInternalServerError, fmt.Sprintf("recorded as job %d, but OpenSM did not apply it: %s; "+
			"the manager applies the recorded state again", job.ID, job.Error)}
	}
	return http.StatusOK, appliedView{Applied: true, Message: job.Result, Job: viewJob(job)}, nil
}

// pkeyView is one pkey as UFM lists it. Membership and Index0 are the
// default partition's: every port's membership and index0 in it.
type pkeyView struct {
	PKey       string       `json:"pkey"`
	Partition  string       `json:"partition"`
	IPoIB      bool         `json:"ip_over_ib"`
	Membership string       `json:"membership,omitempty"`
	Index0     *bool        `json:"index0,omitempty"`
	GUIDs      *[]guidEntry `json:"guids,omitempty"`
	QoSConf    any          `json:"qos_conf,omitempty"`
}

type guidEntry struct {
	GUID       string `json:"guid"`
	Membership string `json:"membership"`
	Index0     bool   `json:"index0"`
}

func viewPKey(p store.KubernetesPKey, withGUIDs, withQoS bool) pkeyView {
	v := pkeyView{PKey: p.PKey.String(), Partition: cmp.Or(p.PartitionName, partitions.KubernetesPartitionName(p.PKey)),
		IPoIB: p.IPoIB}
	if withQoS {
		v.QoSConf = qosConfView(p)
	}
	if withGUIDs {
		guids := make([]guidEntry, len(p.Members))
		for i, m := range p.Members {
			guids[i] = guidEntry{GUID: fmt.Sprintf("%016x", uint64(m.GUID)), Membership: string(m.Membership), Index0: m.Index0}
		}
		v.GUIDs = &guids
	}
	return v
}

// readParams are what a pkeys read may ask: ?guids_data=true, the members;
// ?qos_conf=true, the QoS values.
type readParams struct{ guids, qos bool }

// readParamsOf reads a pkeys read's parameters.
func readParamsOf(r *http.Request) (readParams, error) {
	var p readParams
	for name, to := range map[string]*bool{"guids_data": &p.guids, "qos_conf": &p.qos} {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, badRequest("%s=%q: want true or false", name, v)
		}
		*to = b
	}
	return p, nil
}

// listPKeys answers every Kubernetes pkey, keyed by its pkey ("0x1005"), with
// its members when guids_data=true (ib-kubernetes rebuilds its GUID pool
// from it when it starts), and the default partition.
func (pk *pkeysAPI) listPKeys(r *http.Request, _ httprouter.Params) (int, any, error) {
	params, err := readParamsOf(r)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := pk.srv.dbCtx(r.Context())
	defer cancel()
	list, err := pk.o.Store.KubernetesPKeys(ctx)
	if err != nil {
		return 0, nil, err
	}
	out := make(map[string]pkeyView, len(list)+1)
	out[fmt.Sprintf("0x%x", uint16(fabric.DefaultPKey))] = pk.defaultPKeyView(params.guids, params.qos)
	for _, p := range list {
		out[fmt.Sprintf("0x%x", uint16(p.PKey))] = viewPKey(p, params.guids, params.qos)
	}
	return http.StatusOK, out, nil
}

// getPKey answers one pkey, {} when it is not recorded (as UFM does); and
// last_updated, whose path is a pkey's.
func (pk *pkeysAPI) getPKey(r *http.Request, ps httprouter.Params) (int, any, error) {
	if ps.ByName("pkey") == "last_updated" {
		return pk.lastUpdated(r)
	}
	pkey, err := parsePKey(ps.ByName("pkey"))
	if err != nil {
		return 0, nil, err
	}
	params, err := readParamsOf(r)
	if err != nil {
		return 0, nil, err
	}
	if pkey == fabric.DefaultPKey {
		return http.StatusOK, pk.defaultPKeyView(params.guids, params.qos), nil
	}
	ctx, cancel := pk.srv.dbCtx(r.Context())
	defer cancel()
	p, err := pk.o.Store.GetKubernetesPKey(ctx, pkey)
	if isNotFound(err) {
		return http.StatusOK, struct{}{}, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewPKey(p, params.guids, params.qos), nil
}

// lastUpdated answers when OpenSM was last seen applying a Kubernetes change;
// null before the first. ib-kubernetes holds its next change back until it
// is no earlier than the Date of its previous one.
func (pk *pkeysAPI) lastUpdated(r *http.Request) (int, any, error) {
	ctx, cancel := pk.srv.dbCtx(r.Context())
	defer cancel()
	t, err := pk.o.Store.KubernetesLastUpdated(ctx)
	if err != nil {
		return 0, nil, err
	}
	var v *string
	if t != nil {
		text := t.UTC().Format(lastUpdatedLayout)
		v = &text
	}
	return http.StatusOK, map[string]*string{"last_updated": v}, nil
}

// readStrict reads the body as one JSON object whose every field is known:
// a misspelt field would otherwise be dropped without a word.
func readStrict(r *http.Request, v any) (string, error) {
	raw, err := readAll(r)
	if err != nil {
		return "", err
	}
	if err := decodeStrict(raw, v); err != nil {
		return "", err
	}
	return string(storedRequest(raw)), nil
}

// pkeyBody is a request body that names one pkey.
type pkeyBody interface{ pkeyField() *string }

func (b *createBody) pkeyField() *string  { return b.PKey }
func (b *qosConfBody) pkeyField() *string { return b.PKey }
func (b *hostsBody) pkeyField() *string   { return b.PKey }

// readPKeyRequest reads the body strictly into body (readStrict), then the
// pkey it must name (requiredPKey).
func readPKeyRequest(r *http.Request, body pkeyBody) (raw string, pkey fabric.PKey, err error) {
	if raw, err = readStrict(r, body); err != nil {
		return "", 0, err
	}
	pkey, err = requiredPKey(body.pkeyField())
	return raw, pkey, err
}

// decodeStrict decodes one JSON object whose every field v knows, and
// nothing after it.
func decodeStrict(raw []byte, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badRequest("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body is not valid JSON for this resource: %v", err)
	}
	if dec.More() {
		return badRequest("request body holds more than one JSON value")
	}
	return nil
}

func requiredPKey(p *string) (fabric.PKey, error) {
	if p == nil {
		return 0, badRequest(`"pkey" is missing: want the pkey as "0x" and 1 to 4 hex digits, such as "0x1005"`)
	}
	return parsePKey(*p)
}

// parsePKey reads a pkey as ib-kubernetes writes it: "0x" and 1 to 4 hex
// digits, in either case ("0x1A05"). The membership bit is membership's, not
// the pkey's.
func parsePKey(text string) (fabric.PKey, error) {
	h, ok := strings.CutPrefix(strings.ToLower(text), "0x")
	if !ok || len(h) == 0 || len(h) > 4 {
		return 0, badRequest(`pkey %q: want "0x" and 1 to 4 hex digits, such as "0x1005"`, text)
	}
	v, err := strconv.ParseUint(h, 16, 16)
	switch {
	case err != nil:
		return 0, badRequest("pkey %q is not hexadecimal", text)
	case v == 0:
		return 0, badRequest("pkey %q: 0x0000 is no partition's", text)
	case v&0x8000 != 0:
		return 0, badRequest("pkey %q has the membership bit 0x8000 set: send the pkey without it (0x0001 to 0x7ffe) "+
			"and the membership as membership", text)
	}
	return fabric.PKey(v), nil
}

// pkeyAndGUIDs parses what an add or a remove names: the pkey, then the
// GUIDs.
func pkeyAndGUIDs(pkey *string, guids []string) (fabric.PKey, []fabric.GUID, error) {
	p, err := requiredPKey(pkey)
	if err != nil {
		return 0, nil, err
	}
	list, err := parseGUIDs(guids)
	return p, list, err
}

// parseGUIDs reads a GUID list as ib-kubernetes writes it: 16 hex digits
// each, without separators. A GUID listed twice is refused.
func parseGUIDs(list []string) ([]fabric.GUID, error) {
	if len(list) == 0 {
		return nil, badRequest(`"guids" is missing or empty: want at least one GUID, 16 hex digits such as "020000000000003e"`)
	}
	out := make([]fabric.GUID, 0, len(list))
	seen := make(map[fabric.GUID]bool, len(list))
	for _, text := range list {
		g, err := parseUFMGUID(text)
		if err != nil {
			return nil, err
		}
		if seen[g] {
			return nil, badRequest("GUID %q is listed twice", text)
		}
		seen[g] = true
		out = append(out, g)
	}
	return out, nil
}

func parseUFMGUID(text string) (fabric.GUID, error) {
	h := strings.TrimPrefix(strings.ToLower(text), "0x")
	switch {
	case strings.ContainsAny(h, ":-"):
		return 0, badRequest("GUID %q: write it as 16 hex digits without separators, such as \"020000000000003e\"", text)
	case len(h) != 16:
		return 0, badRequest("GUID %q has %d hex digits: want 16", text, len(h))
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, badRequest("GUID %q is not hexadecimal", text)
	}
	if v == 0 || v == ^uint64(0) {
		return 0, badRequest("GUID %q is no port's", text)
	}
	return fabric.GUID(v), nil
}

func parseMembership(word string) (fabric.Membership, error) {
	switch m := fabric.Membership(word); m {
	case fabric.Full, fabric.Limited:
		return m, nil
	}
	return "", badRequest("membership %q: want full or limited", word)
}
