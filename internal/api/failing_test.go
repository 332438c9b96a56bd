package api

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// failingRecorder is a fake Recorder whose every call fails with err, or
// blocks until its context ends when err is nil (a black-holed database).
// The end-to-end suite takes real databases away; this pins the mapping.
type failingRecorder struct{ err error }

func (f failingRecorder) fail(ctx context.Context) error {
	if f.err == nil {
		<-ctx.Done()
		return fmt.Errorf("query: %w", ctx.Err())
	}
	return fmt.Errorf("query: %w", f.err)
}

func (f failingRecorder) RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RemoveNetwork(ctx context.Context, r store.NetworkRemoval) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RecordPort(ctx context.Context, c store.PortChange) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RemovePort(ctx context.Context, r store.PortRemoval) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) GetJob(ctx context.Context, id int64) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}

func (f failingRecorder) AddKubernetesGUIDs(ctx context.Context, a store.KubernetesAddition) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RemoveKubernetesGUIDs(ctx context.Context, r store.KubernetesRemoval) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) DeleteKubernetesPKey(ctx context.Context, d store.KubernetesDeletion) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) CreateKubernetesPKey(ctx context.Context, c store.KubernetesCreation) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) SetKubernetesQoS(ctx context.Context, q store.KubernetesQoS) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) KubernetesPKeys(ctx context.Context) ([]store.KubernetesPKey, error) {
	return nil, f.fail(ctx)
}
func (f failingRecorder) GetKubernetesPKey(ctx context.Context, p fabric.PKey) (store.KubernetesPKey, error) {
	return store.KubernetesPKey{}, f.fail(ctx)
}
func (f failingRecorder) KubernetesLastUpdated(ctx context.Context) (*time.Time, error) {
	return nil, f.fail(ctx)
}
func (f failingRecorder) ConfirmedHosts(ctx context.Context) ([]store.ConfirmedHost, error) {
	return nil, f.fail(ctx)
}

func (f failingRecorder) PrincipalUsage(ctx context.Context, _ string, _, _ time.Time) (store.Usage, error) {
	return store.Usage{}, f.fail(ctx)
}
