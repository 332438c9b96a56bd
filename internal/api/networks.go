package api

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (s *Server) postNetwork(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordNetwork(r, ps, store.OpCreateNetwork)
}

func (s *Server) putNetwork(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.recordNetwork(r, ps, store.OpUpdateNetwork)
}

// recordNetwork handles POST and PUT alike: both make the network so, so a PUT
// of a network never POSTed (a flat network, with the current driver) records it.
func (s *Server) recordNetwork(r *http.Request, ps httprouter.Params, op string) (int, any, error) {
	raw, err := readAll(r)
	if err != nil {
		return 0, nil, err
	}
	spec, err := decodeNetwork(raw, ps.ByName("id"))
	if err != nil {
		return 0, nil, err
	}
	job, err := s.store.RecordNetwork(r.Context(), store.NetworkChange{
		Network: spec, Operation: op, CreatedBy: principal, Request: string(raw),
		RequestID: RequestID(r.Context()),
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
	id, err := objectID("network", ps.ByName("id"), body.ID)
	if err != nil {
		return 0, nil, err
	}
	job, err := s.store.RemoveNetwork(r.Context(), store.NetworkRemoval{NetworkID: id, CreatedBy: principal,
		Request: raw, RequestID: RequestID(r.Context())})
	if isNotFound(err) {
		return 0, nil, notFound("network %s is not known", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}
