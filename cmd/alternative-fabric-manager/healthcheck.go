package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// runHealthcheck asks the manager that this configuration describes for
// /healthz, on the loopback address when [api] listen is a wildcard, and
// fails unless it answers 200 within 5 seconds. The image's HEALTHCHECK runs
// it, so that the image needs no HTTP client of its own.
func runHealthcheck(ctx context.Context, path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	url, err := healthzURL(cfg.API.Listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check: GET %s answered %s", url, resp.Status)
	}
	return nil
}

// healthzURL is where a manager listening on listen serves /healthz, as seen
// from the same host.
func healthzURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("[api] listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
