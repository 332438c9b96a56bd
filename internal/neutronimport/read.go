package neutronimport

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// DefaultPageSize is how many networks or ports one request to Neutron asks
// for: Neutron answers a page and a link to the next one, so that neither
// side holds a whole cloud's ports in one response.
const DefaultPageSize = 500

// Listing is what Neutron returned: every network and every port, each as
// Neutron's API gives its dictionary (which is what networking-mlnx sends).
type Listing struct {
	Networks []json.RawMessage
	Ports    []json.RawMessage
}

// Read lists every network, then every port, of the Neutron behind client,
// pageSize at a time (DefaultPageSize when 0). The networks are read first:
// a port created while the ports are read may name a network that was not
// listed, and is then reported, not recorded (a later run records it).
func Read(ctx context.Context, client *gophercloud.ServiceClient, pageSize int) (Listing, error) {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	var l Listing
	if err := readAll(ctx, networks.List(client, networks.ListOpts{Limit: pageSize}), networks.ExtractNetworksInto, &l.Networks); err != nil {
		return Listing{}, fmt.Errorf("list Neutron's networks: %w", err)
	}
	if err := readAll(ctx, ports.List(client, ports.ListOpts{Limit: pageSize}), ports.ExtractPortsInto, &l.Ports); err != nil {
		return Listing{}, fmt.Errorf("list Neutron's ports: %w", err)
	}
	return l, nil
}

// readAll appends the objects of each of pager's pages, as extract finds them
// (networks.ExtractNetworksInto, ports.ExtractPortsInto), to all.
func readAll(ctx context.Context, pager pagination.Pager, extract func(pagination.Page, any) error, all *[]json.RawMessage) error {
	return pager.EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		var objs []json.RawMessage
		err := extract(page, &objs)
		*all = append(*all, objs...)
		return err == nil, err
	})
}
