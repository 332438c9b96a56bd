package neutronimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
)

// Source is Neutron's API as the import reads it: the whole listing, then
// each network and port again right before it is recorded, so that one
// deleted in Neutron meanwhile is not brought back.
type Source interface {
	List(ctx context.Context) (Listing, error)
	// Network and Port return the object's dictionary now; ErrGone when
	// Neutron no longer has it.
	Network(ctx context.Context, id string) (json.RawMessage, error)
	Port(ctx context.Context, id string) (json.RawMessage, error)
}

// ErrGone says Neutron no longer has an object it listed.
var ErrGone = errors.New("no longer in Neutron")

// API is the Source of a Neutron's API.
type API struct {
	Client   *gophercloud.ServiceClient
	PageSize int // 0: DefaultPageSize
}

func (a API) List(ctx context.Context) (Listing, error) { return Read(ctx, a.Client, a.PageSize) }

func (a API) Network(ctx context.Context, id string) (json.RawMessage, error) {
	var body struct {
		Network json.RawMessage `json:"network"`
	}
	// The whole answer: networks.GetResult.ExtractInto reads into a struct.
	err := networks.Get(ctx, a.Client, id).Result.ExtractInto(&body)
	return body.Network, gone("network", id, err)
}

func (a API) Port(ctx context.Context, id string) (json.RawMessage, error) {
	var body struct {
		Port json.RawMessage `json:"port"`
	}
	err := ports.Get(ctx, a.Client, id).Result.ExtractInto(&body)
	return body.Port, gone("port", id, err)
}

// gone turns Neutron's 404 into ErrGone.
func gone(kind, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return ErrGone
	}
	return fmt.Errorf("read Neutron's %s %s: %w", kind, id, err)
}
