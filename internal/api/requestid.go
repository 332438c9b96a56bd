package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"
)

// RequestIDHeader carries a request's ID: a client's (HAProxy's unique-id, a
// proxy's) is kept, otherwise one is made; the answer always carries it.
const RequestIDHeader = "X-Request-ID"

// maxRequestIDLength bounds a client's ID: it goes into every log line of the
// request.
const maxRequestIDLength = 128

// reqInfo is what the handlers learn about a request for the middleware that
// wraps them: its ID, the route that matched (for metrics and the log), the
// fabric whose pkeys API it reached, and the job a recorded change became (so
// that the access log ties the request's ID to the job).
type reqInfo struct {
	id     string
	route  string
	fabric string
	job    int64
	// jobCreated is when the job was created: before the request, for a
	// change that changed nothing and was answered with an earlier job
	// (quota.go counts only the jobs a change creates).
	jobCreated time.Time
}

type infoKey struct{}

func infoOf(r *http.Request) *reqInfo {
	info, _ := r.Context().Value(infoKey{}).(*reqInfo)
	return info
}

// RequestID returns the ID of the request ctx belongs to, "" outside one.
func RequestID(ctx context.Context) string {
	if info, ok := ctx.Value(infoKey{}).(*reqInfo); ok {
		return info.id
	}
	return ""
}

// requestInfo gives each request its ID and a place for its route.
func requestInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), infoKey{}, &reqInfo{id: id})))
	})
}

// validRequestID accepts the IDs proxies make (UUIDs, hex, HAProxy's
// %{+X}o\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid) and nothing that could forge a log
// field: printable ASCII without spaces or quotes.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// logger is the server's logger with the request's ID.
func (s *Server) logger(r *http.Request) *slog.Logger {
	if id := RequestID(r.Context()); id != "" {
		return s.log.With("request_id", id)
	}
	return s.log
}
