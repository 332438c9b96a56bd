package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// inTx runs fn in one transaction.
func (e *Engine) inTx(ctx context.Context, fn func(q *pgdb.Queries) error) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return fn(e.q.WithTx(tx)) })
}

// InsertSecretsIfAbsent: under READ COMMITTED, an insert that meets another
// transaction's uncommitted row of the same name waits for it, and the read
// that follows, with a snapshot of its own, sees the winner's value.
func (e *Engine) InsertSecretsIfAbsent(ctx context.Context, secrets map[string]string, now time.Time) (map[string]string, error) {
	out := map[string]string{}
	err := e.inTx(ctx, func(q *pgdb.Queries) error {
		for _, name := range store.SortedSecretNames(secrets) {
			if err := q.InsertSecretIfAbsent(ctx, pgdb.InsertSecretIfAbsentParams{
				Name: name, Value: secrets[name], Now: now}); err != nil {
				return fmt.Errorf("secret %s: %w", name, err)
			}
		}
		rows, err := q.ListSecrets(ctx)
		for _, r := range rows {
			out[r.Name] = r.Value
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (e *Engine) ReplaceExpectedSwitches(ctx context.Context, switches []store.ExpectedSwitch, now time.Time) error {
	return e.inTx(ctx, func(q *pgdb.Queries) error {
		if err := q.DeleteExpectedSwitches(ctx); err != nil {
			return err
		}
		for _, sw := range switches {
			if err := q.InsertExpectedSwitch(ctx, pgdb.InsertExpectedSwitchParams{
				Guid: sw.GUID.String(), Description: sw.Description, Now: now}); err != nil {
				return fmt.Errorf("switch %s: %w", sw.GUID, err)
			}
		}
		return nil
	})
}

func (e *Engine) ListExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error) {
	rows, err := e.q.ListExpectedSwitches(ctx)
	if err != nil {
		return nil, err
	}
	return store.ConvertRows(rows, func(r pgdb.ExpectedSwitch) (store.ExpectedSwitch, error) {
		return store.ExpectedSwitchFromColumns(r.Guid, r.Description, r.ConfirmedAt)
	})
}

func (e *Engine) UpsertEnforcementErrors(ctx context.Context, seen []store.EnforcementSighting, now time.Time) error {
	return e.inTx(ctx, func(q *pgdb.Queries) error {
		for _, s := range seen {
			if err := q.UpsertEnforcementError(ctx, pgdb.UpsertEnforcementErrorParams{
				SwitchGuid: s.Switch, Port: int32(s.Port), Line: s.Line, Now: now}); err != nil {
				return fmt.Errorf("switch port %s: %w", s.SwitchPort(), err)
			}
		}
		return nil
	})
}

func (e *Engine) ListEnforcementErrors(ctx context.Context) ([]store.EnforcementError, error) {
	rows, err := e.q.ListEnforcementErrors(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.EnforcementError, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.EnforcementError{
			EnforcementSighting: store.EnforcementSighting{Switch: r.SwitchGuid, Port: int(r.Port), Line: r.Line},
			FirstSeen:           r.FirstSeen.UTC(), LastSeen: r.LastSeen.UTC(), Count: r.Occurrences})
	}
	return out, nil
}

func (e *Engine) DeleteEnforcementErrors(ctx context.Context) (int64, error) {
	return e.q.DeleteEnforcementErrors(ctx)
}
