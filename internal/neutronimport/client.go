package neutronimport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"gopkg.in/yaml.v2"
)

// Connect returns a client of Neutron's API for cloud of the clouds.yaml at
// cloudsFile: through Keystone (a password, a token or, best, an application
// credential: auth_type v3applicationcredential), or straight to Neutron's
// endpoint with auth_type none (a Neutron run with auth_strategy = noauth).
// Errors name the file and the cloud, never a value of the file: it holds
// secrets.
func Connect(ctx context.Context, cloudsFile, cloud string) (*gophercloud.ServiceClient, error) {
	if cloudsFile == "" || cloud == "" {
		return nil, errors.New("[neutron] clouds_file and cloud must both be set")
	}
	where := fmt.Sprintf("[neutron] cloud %q of %s", cloud, cloudsFile)
	text, err := os.ReadFile(cloudsFile)
	if err != nil {
		return nil, fmt.Errorf("[neutron] clouds_file: %w", err)
	}
	endpoint, noAuth, err := noAuthEndpoint(text, cloud)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if noAuth {
		return noAuthClient(endpoint)
	}
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(text)),
		clouds.WithCloudName(cloud))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	// Keystone's token expires; the client logs in again when it does.
	ao.AllowReauth = true
	provider, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("%s: log in to Keystone at %s: %w", where, ao.IdentityEndpoint, err)
	}
	client, err := openstack.NewNetworkV2(provider, eo)
	if err != nil {
		return nil, fmt.Errorf("%s: find Neutron's endpoint in Keystone's catalog: %w", where, err)
	}
	return client, nil
}

// noAuthCloud is the part of a clouds.yaml cloud that clouds.Parse does not
// read: auth_type none and Neutron's endpoint.
type noAuthCloud struct {
	Clouds map[string]struct {
		AuthType string `yaml:"auth_type"`
		Auth     struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"auth"`
	} `yaml:"clouds"`
}

// noAuthEndpoint says whether cloud of clouds.yaml text uses auth_type none,
// and with which endpoint.
func noAuthEndpoint(text []byte, cloud string) (endpoint string, noAuth bool, err error) {
	var f noAuthCloud
	if err := yaml.Unmarshal(text, &f); err != nil {
		// yaml's errors name a line, never its content.
		return "", false, fmt.Errorf("not a clouds.yaml: %w", err)
	}
	c, ok := f.Clouds[cloud]
	if !ok {
		return "", false, errors.New("no such cloud in the file")
	}
	if c.AuthType != "none" && c.AuthType != "noauth" {
		return "", false, nil
	}
	u, err := url.Parse(c.Auth.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false, errors.New("auth_type none needs auth: endpoint: the URL of Neutron's API (http:// or https://)")
	}
	return c.Auth.Endpoint, true, nil
}

// noAuthClient is a client of the Neutron API at endpoint, which asks for no
// token (Neutron's auth_strategy = noauth).
func noAuthClient(endpoint string) (*gophercloud.ServiceClient, error) {
	provider, err := openstack.NewClient(endpoint)
	if err != nil {
		return nil, err
	}
	ep := gophercloud.NormalizeURL(endpoint)
	return &gophercloud.ServiceClient{ProviderClient: provider, Endpoint: ep, ResourceBase: ep + "v2.0/",
		Type: "network"}, nil
}
