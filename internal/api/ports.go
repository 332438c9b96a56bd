package api

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (s *Server) postPort(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordPort(r, ps, store.OpAddPort)
}

func (s *Server) putPort(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordPort(r, ps, store.OpUpdatePort)
}

// recordPort makes the port's GUID (from its client-id) a full member of its
// network's partition, or records why it holds none; the store decides.
func (s *Server) recordPort(r *http.Request, ps httprouter.Params, op string) (int, any, error) {
	raw, err := readAll(r)
	if err != nil {
		return 0, nil, err
	}
	c, err := decodePort(raw, ps.ByName("id"))
	if err != nil {
		return 0, nil, err
	}
	c.Operation, c.CreatedBy, c.Request, c.RequestID = op, principal, string(raw), RequestID(r.Context())
	job, err := s.store.RecordPort(r.Context(), c)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}

// deletePort removes the port. The driver's body is the port as it last knew
// it: its client-id names the GUID to remove (see store.RemovePort).
func (s *Server) deletePort(r *http.Request, ps httprouter.Params) (int, any, error) {
	var body portBody
	raw, err := readOptionalBody(r, &body)
	if err != nil {
		return 0, nil, err
	}
	id, err := objectID("port", ps.ByName("id"), body.ID)
	if err != nil {
		return 0, nil, err
	}
	removal := store.PortRemoval{PortID: id, CreatedBy: principal, Request: raw, RequestID: RequestID(r.Context())}
	if guid, err := body.clientID(); err == nil && guid != nil {
		removal.GUID = guid
	}
	job, err := s.store.RemovePort(r.Context(), removal)
	if isNotFound(err) {
		return 0, nil, notFound("port %s is not known", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}
