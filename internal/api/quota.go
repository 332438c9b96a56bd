package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Bounded storage per principal. Every change's job keeps its request, for
// job_retention, so a principal that sends changes without end (a hostile
// tenant's client, a client looping on a retry) fills the database's disk.
// Three bounds hold it:
//
//   - a request is stored compactly (storedRequest: its JSON re-encoded
//     without the white space it was padded with) and cut at
//     store.MaxRequest;
//   - a change that changes nothing takes no revision and no job row (store's
//     unchanged.go);
//   - each principal has a quota: the bytes of the requests its jobs keep
//     over the retention window, and the jobs it creates in a minute. A change
//     over either is answered 429 with Retry-After, saying which bound and
//     where it is configured, and counted (RefusalObserver); reads and job
//     polls are never refused.
//
// The usage is read from the database (store.PrincipalUsage), so every
// manager sharing it counts the same jobs, before the change is recorded:
// changes in flight at once may pass a bound by their number, never more.
// Its sum over a week of jobs is no cost for every change's hot path, so a
// principal's usage read is kept for usageTTL (usageCache), the changes
// this process lets through meanwhile added to it (each as one job of its
// body's length, at most store.MaxRequest; a change answered with an earlier
// job adds nothing): another manager's changes of the last usageTTL are the
// most a principal may pass a bound by.

// Quota is one principal's bounds; a zero field bounds nothing.
type Quota struct {
	// MaxStoredBytes bounds the bytes of the requests its jobs keep, of the
	// jobs created over Window.
	MaxStoredBytes int64
	// MaxJobsPerMinute bounds the jobs it creates in a minute.
	MaxJobsPerMinute int
	// Window is how long a job keeps its request: [database] job_retention.
	Window time.Duration
	// Usage reads the principal's usage: the database of its jobs
	// (store.DB for networking-mlnx, its fabric's store.Store for a pkeys
	// client); nil: no bound is checked.
	Usage UsageReader
}

// UsageReader reads what a principal's jobs hold (store.Store, store.DB).
type UsageReader interface {
	PrincipalUsage(ctx context.Context, createdBy string, since, recent time.Time) (store.Usage, error)
}

// RefusalObserver is told of each change a quota refused (metrics.Metrics).
type RefusalObserver interface {
	RequestRefused(principal, reason string)
}

// Reasons a quota refuses a change, as the metric's reason label says.
const (
	ReasonStoredBytes   = "stored_bytes"
	ReasonJobsPerMinute = "jobs_per_minute"
)

// Retry-After of a refusal: a minute frees the jobs-per-minute bound; stored
// bytes free only as jobs pass job_retention, which the client is told.
const (
	retryJobsPerMinute = time.Minute
	retryStoredBytes   = time.Hour
)

// quotaCheck is a principal's quota as a request checks it: whose jobs
// (createdBy), the label the metric and the log give it, and the section
// that configures it, as the refusal names it.
type quotaCheck struct {
	quota     Quota
	createdBy string
	principal string
	section   string
}

// limited runs h, a change, unless its principal is over its quota; a job
// the change created is added to the usage read (usageCache).
func (s *Server) limited(q quotaCheck, h handlerFunc) handlerFunc {
	return func(r *http.Request, ps httprouter.Params) (int, any, error) {
		if err := s.checkQuota(r, q); err != nil {
			return 0, nil, err
		}
		started := time.Now()
		status, body, err := h(r, ps)
		if err == nil && createdSince(r, body, started) {
			s.usage.admit(q, min(max(r.ContentLength, 0), store.MaxRequest))
		}
		return status, body, err
	}
}

// createdSince says whether the change answered body created its job at
// started or after: a change that changed nothing is answered with an
// earlier one, and stores nothing. The store's clock and this one are the
// process'.
func createdSince(r *http.Request, body any, started time.Time) bool {
	if j, ok := body.(acceptedJob); ok {
		return !j.CreatedAt.Before(started)
	}
	if info := infoOf(r); info != nil && info.job != 0 {
		return !info.jobCreated.Before(started)
	}
	return false
}

// checkQuota refuses a change whose principal is over a bound of q, with
// 429 and Retry-After, and counts it; it reads the usage within the
// request's database deadline.
func (s *Server) checkQuota(r *http.Request, q quotaCheck) error {
	if q.quota.Usage == nil || (q.quota.MaxStoredBytes <= 0 && q.quota.MaxJobsPerMinute <= 0) {
		return nil
	}
	u, err := s.usage.read(r.Context(), s, q)
	if err != nil {
		return fmt.Errorf("read the quota of %s: %w", q.principal, err)
	}
	var reason, msg string
	var retry time.Duration
	switch {
	case q.quota.MaxJobsPerMinute > 0 && u.RecentJobs >= int64(q.quota.MaxJobsPerMinute):
		reason, retry = ReasonJobsPerMinute, retryJobsPerMinute
		msg = fmt.Sprintf("too many changes: %d in the last minute, at most %d (%s max_jobs_per_minute); "+
			"nothing was recorded: send it again later", u.RecentJobs, q.quota.MaxJobsPerMinute, q.section)
	case q.quota.MaxStoredBytes > 0 && u.RequestBytes >= q.quota.MaxStoredBytes:
		reason, retry = ReasonStoredBytes, retryStoredBytes
		msg = fmt.Sprintf("too much stored: the jobs of the last %s keep %d bytes of requests, at most %d "+
			"(%s max_stored_request_bytes); they free as jobs pass [database] job_retention; "+
			"nothing was recorded: send it again later", q.quota.Window, u.RequestBytes, q.quota.MaxStoredBytes, q.section)
	default:
		return nil
	}
	s.logger(r).Warn("change refused: over its principal's quota", "principal", q.principal, "reason", reason,
		"recent_jobs", u.RecentJobs, "stored_request_bytes", u.RequestBytes)
	if o, ok := s.opts.Observer.(RefusalObserver); ok {
		o.RequestRefused(q.principal, reason)
	}
	return &quotaError{httpError{http.StatusTooManyRequests, msg}, retry}
}

// quotaError is a 429 and the Retry-After it is answered with.
type quotaError struct {
	httpError
	retry time.Duration
}

// retryAfter is Retry-After's value for d: whole seconds.
func retryAfter(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// usageTTL is how long a principal's usage read is used before it is read
// again.
const usageTTL = time.Second

// usageCache is each principal's usage as last read, and when, by the
// principal's createdBy and section (a fabric's ib-kubernetes and
// another's share a createdBy). The zero value is ready to use.
type usageCache struct {
	mu      sync.Mutex
	entries map[string]*usageEntry
}

type usageEntry struct {
	read time.Time
	u    store.Usage
}

func (q quotaCheck) key() string { return q.createdBy + "\x00" + q.section }

// read returns q's principal's usage: as read less than usageTTL ago, or
// read now from the database within the request's deadline.
func (c *usageCache) read(ctx context.Context, s *Server, q quotaCheck) (store.Usage, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[q.key()]
	if ok && now.Sub(e.read) < usageTTL {
		u := e.u
		c.mu.Unlock()
		return u, nil
	}
	c.mu.Unlock()
	ctx, cancel := s.dbCtx(ctx)
	defer cancel()
	u, err := q.quota.Usage.PrincipalUsage(ctx, q.createdBy, now.Add(-q.quota.Window), now.Add(-time.Minute))
	if err != nil {
		return store.Usage{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*usageEntry{}
	}
	c.entries[q.key()] = &usageEntry{read: now, u: u}
	return u, nil
}

// admit adds a change let through, of about bytes, to q's principal's
// usage until it is read again.
func (c *usageCache) admit(q quotaCheck, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[q.key()]; ok {
		e.u.RecentJobs++
		e.u.RequestBytes += bytes
	}
}
