package api

import (
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (s *Server) postPort(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordPort(r, ps, store.OpAddPort)
}

func (s *Server) putPort(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordPort(r, ps, store.OpUpdatePort)
}

// recordPort makes the port's GUID (from its client-id) a full member of its
// network's partition.
func (s *Server) recordPort(r *http.Request, ps httprouter.Params, op string) (int, any, error) {
	var body portBody
	raw, err := readBody(r, &body)
	if err != nil {
		return 0, nil, err
	}
	id, err := objectID("port", ps, body.ID)
	if err != nil {
		return 0, nil, err
	}
	if body.NetworkID == "" {
		return 0, nil, badRequest("port %s: network_id is missing", id)
	}
	guid, err := fabric.ClientIDFromOptions(body.ExtraDHCPOpts)
	if errors.Is(err, fabric.ErrNoClientID) {
		return 0, nil, badRequest("port %s: no usable client-id in extra_dhcp_opts (option \"client-id\" or \"61\"), "+
			"so it has no GUID to put in a partition; for VM ports, list mlnx_infiniband before mlnx_sdn_assist "+
			"in [ml2] mechanism_drivers", id)
	}
	if err != nil {
		return 0, nil, badRequest("port %s: %v", id, err)
	}
	job, err := s.store.RecordPort(r.Context(), store.PortChange{
		Port:      store.Port{ID: id, NetworkID: body.NetworkID, GUID: &guid, Host: body.HostID},
		Operation: op, CreatedBy: principal, Request: raw,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}

func (s *Server) deletePort(r *http.Request, ps httprouter.Params) (int, any, error) {
	var body portBody
	raw, err := readOptionalBody(r, &body)
	if err != nil {
		return 0, nil, err
	}
	id, err := objectID("port", ps, body.ID)
	if err != nil {
		return 0, nil, err
	}
	job, err := s.store.RemovePort(r.Context(), id, principal, raw)
	if isNotFound(err) {
		return 0, nil, notFound("port %s is not known", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}
