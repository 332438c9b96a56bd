package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// networkBody is the part of Neutron's network dictionary we act on; the rest is
// kept verbatim in the job's request.
type networkBody struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	segment
	// Segments replace the provider:* keys on a multi-segment network.
	Segments []segment `json:"segments"`
}

// segment is one of a network's segments, or its provider:* keys.
type segment struct {
	NetworkType     string `json:"provider:network_type"`
	PhysicalNetwork string `json:"provider:physical_network"`
	SegmentationID  *int64 `json:"provider:segmentation_id"`
}

// portBody is the part of Neutron's port dictionary we act on.
type portBody struct {
	ID            string              `json:"id"`
	NetworkID     string              `json:"network_id"`
	DeviceOwner   string              `json:"device_owner"`
	HostID        string              `json:"binding:host_id"`
	ExtraDHCPOpts []fabric.DHCPOption `json:"extra_dhcp_opts"`
	// Network is the port's network, which newer drivers embed.
	Network *networkBody `json:"network"`
}

// identified is a Neutron object's body: a network's or a port's, each with
// its own id, which the path's id must agree with (objectID).
type identified interface {
	networkBody | portBody
	idInBody() string
}

func (b networkBody) idInBody() string { return b.ID }
func (b portBody) idInBody() string    { return b.ID }

// clientID is the GUID of the port's client-id: nil without one, an error when
// the one it carries is unusable.
func (b portBody) clientID() (*fabric.GUID, error) {
	guid, err := fabric.ClientIDFromOptions(b.ExtraDHCPOpts)
	if errors.Is(err, fabric.ErrNoClientID) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &guid, nil
}

// decodeNetwork reads a POST or PUT network body; pathID is the id in the URL,
// if any.
func decodeNetwork(raw []byte, pathID string) (store.NetworkSpec, error) {
	body, id, err := decodeIdentified[networkBody](raw, "network", pathID)
	if err != nil {
		return store.NetworkSpec{}, err
	}
	return body.spec(id), nil
}

// spec is the network as the store takes it. A multi-segment network is
// described by its first VLAN or flat segment (the only kinds with a
// partition), or else by its first segment. A body with a VLAN ID and no type
// (UFM's documented minimal POST) is a VLAN network.
func (b networkBody) spec(id string) store.NetworkSpec {
	seg := b.segment
	if seg.NetworkType == "" && len(b.Segments) > 0 {
		seg = b.Segments[0]
		for _, s := range b.Segments {
			if s.NetworkType == store.TypeVLAN || s.NetworkType == store.TypeFlat {
				seg = s
				break
			}
		}
	}
	if seg.NetworkType == "" && seg.SegmentationID != nil {
		seg.NetworkType = store.TypeVLAN
	}
	return store.NetworkSpec{ID: id, Name: b.Name, Type: seg.NetworkType,
		PhysicalNetwork: seg.PhysicalNetwork, SegmentationID: seg.SegmentationID}
}

// decodePort reads a POST or PUT port body into the change the store records.
func decodePort(raw []byte, pathID string) (store.PortChange, error) {
	body, id, err := decodeIdentified[portBody](raw, "port", pathID)
	if err != nil {
		return store.PortChange{}, err
	}
	if body.NetworkID == "" {
		return store.PortChange{}, badRequest("port %s: network_id is missing", id)
	}
	if _, err := checkID("network", body.NetworkID); err != nil {
		return store.PortChange{}, err
	}
	c := store.PortChange{DeviceOwner: body.DeviceOwner,
		Port: store.Port{ID: id, NetworkID: body.NetworkID, Host: body.HostID}}
	c.Port.GUID, c.ClientIDError = body.clientID()
	if n := body.Network; n != nil {
		if n.ID != "" && n.ID != body.NetworkID {
			return store.PortChange{}, badRequest("port %s: network_id %q differs from the id %q of the embedded network",
				id, body.NetworkID, n.ID)
		}
		spec := n.spec(body.NetworkID)
		c.Network = &spec
	}
	return c, nil
}

// recordHandler answers a POST or PUT (op) of a network or port: decode
// reads its body (decodeNetwork, decodePort) with the id in the path, if
// any; record records the change, with the body to store with the job
// (storedRequest).
func recordHandler[T any](decode func(raw []byte, pathID string) (T, error),
	record func(ctx context.Context, change T, op string, raw []byte) (store.Job, error), op string) handlerFunc {
	return func(r *http.Request, ps httprouter.Params) (int, any, error) {
		raw, err := readAll(r)
		if err != nil {
			return 0, nil, err
		}
		change, err := decode(raw, ps.ByName("id"))
		if err != nil {
			return 0, nil, err
		}
		return answerRecorded(record(r.Context(), change, op, storedRequest(raw)))
	}
}

// decodeIdentified decodes a POST or PUT body of kind ("network", "port") and
// returns it with the object's id.
func decodeIdentified[B identified](raw []byte, kind, pathID string) (B, string, error) {
	var body B
	if err := decodeObject(raw, &body); err != nil {
		return body, "", err
	}
	id, err := objectID(kind, pathID, body.idInBody())
	return body, id, err
}

// deleteObject answers a DELETE of an object of kind ("network", "port"):
// it reads the optional body and the object's id, and records the removal
// (remove, given the raw body to store with the job). An object the store
// does not know is a 404.
func deleteObject[B identified](r *http.Request, ps httprouter.Params, kind string,
	remove func(body B, id, raw string) (store.Job, error)) (int, any, error) {
	var body B
	raw, err := readOptionalBody(r, &body)
	if err != nil {
		return 0, nil, err
	}
	id, err := objectID(kind, ps.ByName("id"), body.idInBody())
	if err != nil {
		return 0, nil, err
	}
	job, err := remove(body, id, raw)
	if isNotFound(err) {
		return 0, nil, notFound("%s %s is not known", kind, id)
	}
	return answerRecorded(job, err)
}

// readOptionalBody reads at most MaxBodyBytes and decodes the JSON object into
// v, for DELETEs, whose body may be empty: the driver sends the object, UFM's
// own clients may send only {"id": ...} or nothing. It returns the body to
// store with the job for DBAs and diagnosis (storedRequest).
func readOptionalBody(r *http.Request, v any) (string, error) {
	raw, err := readAll(r)
	if err != nil || len(bytes.TrimSpace(raw)) == 0 {
		return "", err
	}
	if err := decodeObject(raw, v); err != nil {
		return "", err
	}
	return string(storedRequest(raw)), nil
}

// storedRequest is what a job keeps of a request body that decoded as one
// JSON value: the value without the white space between its tokens
// (json.Compact), so that a body padded with blanks costs the database no
// more than the same body without them. What the client meant stays: the
// strings and numbers are kept as sent.
func storedRequest(raw []byte) []byte {
	trimmed := bytes.TrimSpace(raw)
	var b bytes.Buffer
	b.Grow(len(trimmed))
	if err := json.Compact(&b, trimmed); err != nil {
		return trimmed // not JSON: the callers store only bodies that decoded
	}
	return b.Bytes()
}

func readAll(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &httpError{http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body over %d bytes", MaxBodyBytes)}
		}
		return nil, badRequest("reading request body: %v", err)
	}
	return raw, nil
}

// decodeObject decodes one JSON object and nothing after it.
func decodeObject(raw []byte, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badRequest("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return badRequest("request body is not valid JSON for this resource: %v", err)
	}
	if dec.More() {
		return badRequest("request body holds more than one JSON value")
	}
	return nil
}

// objectID takes the id from the path and, failing that, the body (UFM's
// documented DELETE carries it only in the body); the two must agree.
func objectID(kind, pathID, bodyID string) (string, error) {
	switch {
	case pathID != "" && bodyID != "" && pathID != bodyID:
		return "", badRequest("%s id %q in the path differs from id %q in the body", kind, pathID, bodyID)
	case pathID != "":
		return checkID(kind, pathID)
	case bodyID != "":
		return checkID(kind, bodyID)
	}
	return "", badRequest("%s has no id", kind)
}

// checkID accepts Neutron's ids (UUIDs) and anything else short and printable.
func checkID(kind, id string) (string, error) {
	if len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", badRequest("%s id %q: want at most 64 printable characters", kind, id)
	}
	return id, nil
}
