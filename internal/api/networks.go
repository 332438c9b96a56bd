package api

import (
	"context"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// recordNetwork records a POST or PUT (op) of a network. Both make the
// network so, so a PUT of a network never POSTed (a flat network, with the
// current driver) records it.
func (s *Server) recordNetwork(ctx context.Context, spec store.NetworkSpec, op string, raw []byte) (store.Job, error) {
	return s.store.RecordNetwork(ctx, store.NetworkChange{
		Network: spec, Operation: op, CreatedBy: principal, Request: string(raw),
		RequestID: RequestID(ctx),
	})
}

func (s *Server) deleteNetwork(r *http.Request, ps httprouter.Params) (int, any, error) {
	return deleteObject(r, ps, "network", func(_ networkBody, id, raw string) (store.Job, error) {
		return s.store.RemoveNetwork(r.Context(), store.NetworkRemoval{NetworkID: id, CreatedBy: principal,
			Request: raw, RequestID: RequestID(r.Context())})
	})
}
