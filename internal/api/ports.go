package api

import (
	"context"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// recordPort records a POST or PUT (op) of a port: its GUID (from its
// client-id) becomes a full member of its network's partition, or the store
// records why it holds none.
func (s *Server) recordPort(ctx context.Context, c store.PortChange, op string, raw []byte) (store.Job, error) {
	c.Operation, c.CreatedBy, c.Request, c.RequestID = op, principal, string(raw), RequestID(ctx)
	return s.store.RecordPort(ctx, c)
}

// deletePort removes the port. The driver's body is the port as it last knew
// it: its client-id names the GUID to remove (see store.RemovePort).
func (s *Server) deletePort(r *http.Request, ps httprouter.Params) (int, any, error) {
	return deleteObject(r, ps, "port", func(body portBody, id, raw string) (store.Job, error) {
		removal := store.PortRemoval{PortID: id, CreatedBy: principal, Request: raw, RequestID: RequestID(r.Context())}
		if guid, err := body.clientID(); err == nil && guid != nil {
			removal.GUID = guid
		}
		return s.store.RemovePort(r.Context(), removal)
	})
}
