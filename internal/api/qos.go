package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// A pkey's QoS through UFM's pkeys API: mtu_limit (2 or 4, KB),
// service_level (0-15) and rate_limit (UFM's list of Gb/s, 2.5 among them)
// on POST /resources/pkeys and /resources/pkeys/add, and on PUT
// /resources/pkeys/qos_conf; every read with qos_conf=true returns them. A
// QoS change is recorded, applied and answered as any other change of the
// pkeys API: after the sweep that proves it.

// qosFields are UFM's QoS fields of a request; a field left out keeps the
// recorded value (UFM's default for a new pkey).
type qosFields struct {
	MTULimit     *json.Number `json:"mtu_limit"`
	ServiceLevel *json.Number `json:"service_level"`
	RateLimit    *json.Number `json:"rate_limit"`
}

// change checks the fields as UFM would, naming the one that is wrong.
func (q qosFields) change() (store.QoSChange, error) {
	var c store.QoSChange
	if q.MTULimit != nil {
		v, err := strconv.Atoi(q.MTULimit.String())
		if err != nil || (v != 2 && v != 4) {
			return c, badRequest("mtu_limit %s: want 2 or 4 (KB)", q.MTULimit.String())
		}
		c.MTULimit = &v
	}
	if q.ServiceLevel != nil {
		v, err := strconv.Atoi(q.ServiceLevel.String())
		if err != nil || v < 0 || v > 15 {
			return c, badRequest("service_level %s: want a whole number from 0 to 15", q.ServiceLevel.String())
		}
		c.ServiceLevel = &v
	}
	if q.RateLimit != nil {
		gbps, err := strconv.ParseFloat(q.RateLimit.String(), 64)
		mbps, ok := fabric.RateMbpsOf(gbps)
		if err != nil || !ok {
			return c, badRequest("rate_limit %s: want one of %s (Gb/s)", q.RateLimit.String(), fabric.RateLimitList())
		}
		c.RateMbps = &mbps
	}
	return c, nil
}

// qosConfBody is a PUT of /resources/pkeys/qos_conf.
type qosConfBody struct {
	PKey *string `json:"pkey"`
	qosFields
}

// setQoS sets a recorded pkey's QoS: 404 when the pkey is not recorded, 400
// when a value is not UFM's or none is given.
func (pk *pkeysAPI) setQoS(r *http.Request, _ httprouter.Params) (int, any, error) {
	var body qosConfBody
	raw, pkey, err := readPKeyRequest(r, &body)
	if err != nil {
		return 0, nil, err
	}
	c, err := body.change()
	if err != nil {
		return 0, nil, err
	}
	if c.Empty() {
		return 0, nil, badRequest("no QoS to set: give mtu_limit, service_level or rate_limit with the pkey")
	}
	return pk.recordAndAwait(r, func(ctx context.Context) (store.Job, error) {
		job, err := pk.o.Store.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: pkey, QoS: c,
			CreatedBy: pk.o.creator(), Request: raw, RequestID: RequestID(r.Context())})
		if isNotFound(err) {
			return job, notFound("pkey %s is not a Kubernetes partition: add GUIDs to it first", pkey)
		}
		return job, err
	})
}

// qosView is a pkey's qos_conf as UFM returns it: rate_limit in Gb/s (2.5
// as 2.5).
type qosView struct {
	MTULimit     int     `json:"mtu_limit"`
	RateLimit    float64 `json:"rate_limit"`
	ServiceLevel int     `json:"service_level"`
}

// qosConfView is a recorded pkey's qos_conf, as a read with qos_conf=true
// answers it: the QoS a client set, or, for a pkey whose QoS no client set
// (ib-kubernetes never does), what OpenSM applies to its partition's line
// without mtu=, rate= and sl=: not UFM's defaults, whose 2.5 Gb/s is not the
// 10 Gb/s of its IPoIB group, and no limit on its paths.
func qosConfView(p store.KubernetesPKey) any {
	if p.QoS == (fabric.QoS{}) {
		return viewQoS(fabric.OpenSMGroupQoS)
	}
	return viewQoS(p.QoS)
}

func viewQoS(q fabric.QoS) *qosView {
	return &qosView{MTULimit: q.MTULimit, RateLimit: q.RateGbps(), ServiceLevel: q.ServiceLevel}
}
