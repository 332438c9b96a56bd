package store

import (
	"context"
	"fmt"
	"time"
)

// Usage is what a principal's jobs hold (the API's quota, internal/api's
// quota.go), read from the database, so that every manager sharing it
// counts the same jobs.
type Usage struct {
	// RecentJobs are the jobs it created since the time asked.
	RecentJobs int64
	// RequestBytes are the bytes of the requests its jobs keep, of those
	// created since the window's start.
	RequestBytes int64
}

// PrincipalUsage reads the usage of the jobs createdBy created on the
// view's fabric: those created since recent, and the bytes of the requests
// of those created since since.
func (s *Store) PrincipalUsage(ctx context.Context, createdBy string, since, recent time.Time) (Usage, error) {
	return principalUsage(ctx, s, createdBy, s.FabricName(), since, recent)
}

// PrincipalUsage is Store.PrincipalUsage over every fabric: networking-mlnx
// is one principal, whatever fabric its networks are on.
func (db *DB) PrincipalUsage(ctx context.Context, createdBy string, since, recent time.Time) (Usage, error) {
	return principalUsage(ctx, db.defaultView(), createdBy, "", since, recent)
}

// principalUsage reads createdBy's usage on fabric ("": every fabric)
// through s's database.
func principalUsage(ctx context.Context, s *Store, createdBy, fabric string, since, recent time.Time) (Usage, error) {
	r, err := s.d.Queries(ctx).PrincipalUsage(ctx, recent, createdBy, since, fabric)
	if err != nil {
		return Usage{}, fmt.Errorf("read the jobs of %s: %w", createdBy, err)
	}
	return Usage{RecentJobs: r.RecentJobs, RequestBytes: r.RequestBytes}, nil
}
