package api

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (s *Server) postNetwork(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordNetwork(r, ps, store.OpCreateNetwork)
}

func (s *Server) putNetwork(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordNetwork(r, ps, store.OpUpdateNetwork)
}

// recordNetwork handles POST and PUT alike: both make the network so.
func (s *Server) recordNetwork(r *http.Request, ps httprouter.Params, op string) (int, any, error) {
	var body networkBody
	raw, err := readBody(r, &body)
	if err != nil {
		return 0, nil, err
	}
	id, err := objectID("network", ps, body.ID)
	if err != nil {
		return 0, nil, err
	}
	if body.NetworkType != "vlan" {
		return 0, nil, badRequest("network %s: provider:network_type %q is not supported: want \"vlan\"",
			id, body.NetworkType)
	}
	if body.SegmentationID == nil {
		return 0, nil, badRequest("network %s: provider:segmentation_id is missing: a VLAN network needs one", id)
	}
	vlan := *body.SegmentationID
	if vlan < 1 || vlan > int64(fabric.MaxNetworkPKey) {
		return 0, nil, badRequest("network %s: VLAN ID %d cannot be a partition key: want 1..%d",
			id, vlan, fabric.MaxNetworkPKey)
	}
	pkey := fabric.PKey(vlan)
	job, err := s.store.RecordNetwork(r.Context(), store.NetworkChange{
		Network: store.Network{ID: id, Name: body.Name, Type: body.NetworkType,
			PhysicalNetwork: body.PhysicalNetwork, PKey: &pkey},
		Operation: op, CreatedBy: principal, Request: raw,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}

func (s *Server) deleteNetwork(r *http.Request, ps httprouter.Params) (int, any, error) {
	var body networkBody
	raw, err := readOptionalBody(r, &body)
	if err != nil {
		return 0, nil, err
	}
	id, err := objectID("network", ps, body.ID)
	if err != nil {
		return 0, nil, err
	}
	job, err := s.store.RemoveNetwork(r.Context(), id, principal, raw)
	if isNotFound(err) {
		return 0, nil, notFound("network %s is not known", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}
