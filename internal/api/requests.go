package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// networkBody is the part of Neutron's network dictionary we act on; the rest is
// kept verbatim in the job's request.
type networkBody struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
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
}

// readBody reads at most MaxBodyBytes and decodes the JSON object into v.
// It returns the raw body, stored with the job for DBAs and diagnosis.
func readBody(r *http.Request, v any) (string, error) {
	raw, err := readAll(r)
	if err != nil {
		return "", err
	}
	return string(raw), decodeObject(raw, v)
}

// readOptionalBody is readBody for DELETEs, whose body may be empty: the driver
// sends the object, UFM's own clients may send only {"id": ...} or nothing.
func readOptionalBody(r *http.Request, v any) (string, error) {
	raw, err := readAll(r)
	if err != nil || len(bytes.TrimSpace(raw)) == 0 {
		return "", err
	}
	return string(raw), decodeObject(raw, v)
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
func objectID(kind string, ps httprouter.Params, bodyID string) (string, error) {
	pathID := ps.ByName("id")
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
