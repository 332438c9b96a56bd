package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// runHealthcheck asks the manager configured in path for /readyz on its API
// listener, prints the answer, and fails unless it is 200: the image's
// HEALTHCHECK, which has no curl. A wildcard listen address is asked on
// loopback. Over HTTPS the certificate is not verified: the check talks to its
// own container, whose name the certificate need not carry.
func runHealthcheck(ctx context.Context, path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(cfg.API.Listen)
	if err != nil {
		return fmt.Errorf("[api] listen: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	tr := &http.Transport{}
	if cfg.API.TLSCertFile != "" {
		scheme = "https"
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // its own process, see above
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	os.Stdout.Write(body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready (%s)", resp.Status)
	}
	return nil
}
