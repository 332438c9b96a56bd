package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Paths as networking-mlnx builds them with the default [api] prefix and domain.
const (
	apiPrefix = "/ufmRestV3"
	apiDomain = "cloudx"
)

// apiClient talks to a manager as networking-mlnx does: token as is, JSON
// content type on every request, connections kept alive.
type apiClient struct {
	base    string
	http    *http.Client
	lastJob atomic.Int64 // the highest job number the manager has answered with
	// given is every job number the manager answered with, in order: job
	// numbers grow with time, not by one, so a load that reads existing jobs
	// picks them here.
	mu    sync.Mutex
	given []int64
}

// jobCount is how many jobs the manager has answered with.
func (c *apiClient) jobCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.given)
}

// jobAt is the i-th job number the manager answered with (0: the first).
func (c *apiClient) jobAt(i int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.given[i]
}

func newAPIClient(base string) *apiClient {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	// The manager answers within a fraction of networking-mlnx's 10 s timeout,
	// or the figure is worthless anyway.
	return &apiClient{base: base, http: &http.Client{Transport: transport, Timeout: 30 * time.Second}}
}

// do sends one request and returns the status and body.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+apiPrefix+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Basic "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// accept sends a change and returns the job path of its 202.
func (c *apiClient) accept(ctx context.Context, method, path string, body []byte) (string, error) {
	status, answer, err := c.do(ctx, method, path, body)
	if err != nil {
		return "", err
	}
	if status != http.StatusAccepted {
		return "", fmt.Errorf("%s %s: status %d, want 202: %s", method, path, status, answer)
	}
	var job string
	if err := json.Unmarshal(answer, &job); err != nil || !strings.HasPrefix(job, "app/jobs/") {
		return "", fmt.Errorf("%s %s: answer %q is not a job path", method, path, answer)
	}
	n, err := jobNumber(job)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	c.mu.Lock()
	c.given = append(c.given, n)
	c.mu.Unlock()
	for {
		last := c.lastJob.Load()
		if n <= last || c.lastJob.CompareAndSwap(last, n) {
			break
		}
	}
	return job, nil
}

func (c *apiClient) postNetwork(ctx context.Context, id string, vlan int) (string, error) {
	body := fmt.Sprintf(`{"id": %q, "name": "bench", "provider:network_type": "vlan", `+
		`"provider:physical_network": "ibnet", "provider:segmentation_id": %d}`, id, vlan)
	return c.accept(ctx, http.MethodPost, "/"+apiDomain+"/Network", []byte(body))
}

// postPort sends the POST of a baremetal port, as Ironic's port creation does.
func (c *apiClient) postPort(ctx context.Context, p benchPort) (string, error) {
	return c.accept(ctx, http.MethodPost, "/"+apiDomain+"/Port", p.body)
}

// jobStatus reads a job's Status.
func (c *apiClient) jobStatus(ctx context.Context, job string) (string, error) {
	status, body, err := c.do(ctx, http.MethodGet, "/"+job, nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d: %s", job, status, body)
	}
	var j struct{ Status, Summary string }
	if err := json.Unmarshal(body, &j); err != nil {
		return "", fmt.Errorf("GET %s: %w: %s", job, err, body)
	}
	switch j.Status {
	case "Completed", "Pending", "Running":
		return j.Status, nil
	}
	return "", fmt.Errorf("job %s: status %q: %s", job, j.Status, j.Summary)
}

// waitCompleted polls the job every interval until it reads Completed, and
// returns when that was first seen.
func (c *apiClient) waitCompleted(ctx context.Context, job string, interval time.Duration) (time.Time, error) {
	w, err := c.waitPlanned(ctx, job, pollPlan{every: interval})
	return w.done, err
}

// pollPlan says when a client polls its job: its first GET after first
// (at once: 0), then every every.
type pollPlan struct{ first, every time.Duration }

// waited is what a client saw while waiting for its job: when it first read
// Completed, when it sent the last GET that read anything else (the job
// completed between the two: their gap is how finely the wait was measured),
// and how many GETs it sent.
type waited struct {
	done, lastNotDone time.Time
	polls             int
}

// waitPlanned polls the job by plan until it reads Completed.
func (c *apiClient) waitPlanned(ctx context.Context, job string, plan pollPlan) (waited, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var w waited
	if err := sleep(ctx, plan.first); err != nil {
		return w, fmt.Errorf("job %s not Completed: %w", job, err)
	}
	for {
		sent := time.Now()
		status, err := c.jobStatus(ctx, job)
		w.polls++
		if err != nil {
			return w, err
		}
		if status == "Completed" {
			w.done = time.Now()
			return w, nil
		}
		w.lastNotDone = sent
		if err := sleep(ctx, plan.every); err != nil {
			return w, fmt.Errorf("job %s not Completed: %w", job, err)
		}
	}
}

// benchPort is a port with a GUID of its own. The GUIDs are not on the
// simulated fabric: OpenSM skips absent members (a VERBOSE line), and the
// manager's work does not depend on where a GUID is.
type benchPort struct {
	id   string
	body []byte
}

// portSource hands out ports with distinct ids and GUIDs.
type portSource struct {
	network string
	next    atomic.Uint64
}

func newPortSource(network string) *portSource { return &portSource{network: network} }

// guidBase is outside the simulated fabric's GUIDs (0x0002c903...).
const guidBase = 0x0002c90400000000

func (s *portSource) port() benchPort {
	n := s.next.Add(1)
	return makePort(fmt.Sprintf("8a4f2c6e-1d3b-4e5f-9a7c-%012x", n), s.network, fmt.Sprintf("bench-node-%d", n),
		uint64(guidBase)+n)
}

// makePort is the POST body of a baremetal port of network on host, whose
// client-id carries guid, as Ironic and networking-mlnx send it.
func makePort(id, network, host string, guid uint64) benchPort {
	var clientID strings.Builder
	clientID.WriteString("ff:00:00:00:00:00:02:00:00:02:c9:00")
	for shift := 56; shift >= 0; shift -= 8 {
		fmt.Fprintf(&clientID, ":%02x", byte(guid>>shift))
	}
	body := fmt.Sprintf(`{"id": %q, "network_id": %q, "device_owner": "baremetal:none", `+
		`"binding:vnic_type": "baremetal", "binding:host_id": %q, `+
		`"binding:profile": {"local_link_information": [{}]}, `+
		`"extra_dhcp_opts": [{"opt_name": "client-id", "opt_value": %q, "ip_version": 4}]}`,
		id, network, host, clientID.String())
	return benchPort{id: id, body: []byte(body)}
}

// jobNumber is n of "app/jobs/<n>".
func jobNumber(job string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(job, "app/jobs/"), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("job path %q: want app/jobs/<number>", job)
	}
	return n, nil
}

func jobPath(n int64) string { return "app/jobs/" + strconv.FormatInt(n, 10) }
