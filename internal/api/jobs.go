package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// jobView is UFM's job object (contract §8).
type jobView struct {
	ID             string   `json:"ID"`
	Status         string   `json:"Status"`
	Progress       int      `json:"Progress"`
	Description    string   `json:"Description"`
	Summary        string   `json:"Summary"`
	RelatedObjects []string `json:"RelatedObjects"`
	Created        string   `json:"Created"`
	LastUpdated    string   `json:"LastUpdated"`
	CreatedBy      string   `json:"CreatedBy"`
	Operation      string   `json:"Operation"`
	Foreground     bool     `json:"Foreground"`
	SiteName       *string  `json:"SiteName"`
}

// ufmTime is UFM's timestamp form: UTC, no zone.
const ufmTime = "2006-01-02 15:04:05"

// viewJob is job j as its client reads it, its texts escaped as the store
// writes them (escape.Lines): a row written before did not escape them.
func viewJob(j store.Job) jobView {
	v := jobView{
		ID: strconv.FormatInt(j.ID, 10), Status: j.Status, Description: escape.Lines(j.Description),
		RelatedObjects: []string{j.NetworkID}, Created: j.CreatedAt.UTC().Format(ufmTime),
		LastUpdated: j.UpdatedAt.UTC().Format(ufmTime), CreatedBy: j.CreatedBy, Operation: j.Operation,
	}
	switch j.ObjectType {
	case store.ObjectPort:
		v.RelatedObjects = append(v.RelatedObjects, j.ObjectID)
	case store.ObjectPKey:
		v.RelatedObjects = []string{j.ObjectID} // a Kubernetes pkey's job has no network
	}
	switch j.Status {
	case store.StatusCompleted:
		v.Progress, v.Summary = 100, escape.Lines(j.Result)
	case store.StatusFailed:
		v.Progress, v.Summary = 100, escape.Lines(j.Error)
	}
	return v
}

// acceptedJob marks a handler's result as "answer 202 with this job's path".
type acceptedJob store.Job

// answerRecorded answers a change: 202 with its job, or the error that
// kept it from being recorded.
func answerRecorded(job store.Job, err error) (int, any, error) {
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, acceptedJob(job), nil
}

// getJob answers networking-mlnx's jobs (see jobOf).
func (s *Server) getJob(r *http.Request, ps httprouter.Params) (int, any, error) {
	return s.jobOf(r, ps.ByName("id"), principal, s.store.GetJob)
}

// getKubernetesJob answers ib-kubernetes' jobs (see jobOf) of this fabric,
// on the pkeys API's own path.
func (pk *pkeysAPI) getKubernetesJob(r *http.Request, ps httprouter.Params) (int, any, error) {
	ctx, cancel := pk.srv.dbCtx(r.Context())
	defer cancel()
	return pk.srv.jobOf(r.WithContext(ctx), ps.ByName("id"), pk.o.creator(), pk.fabricJob)
}

// fabricJob reads job id when it is this fabric's, and is ErrNotFound for
// another fabric's: job ids are global, and one fabric's ib-kubernetes may
// neither read what another's asked for nor learn that a job is another's.
func (pk *pkeysAPI) fabricJob(ctx context.Context, id int64) (store.Job, error) {
	j, err := pk.o.Store.GetJob(ctx, id)
	if err == nil && j.Fabric != pk.o.fabric() {
		return store.Job{}, store.ErrNotFound
	}
	return j, err
}

// jobOf answers job id when creator created it, and 404 otherwise, as for a
// job that does not exist: job ids are sequential, and neither side may read
// what the other asked for, nor learn that a job is the other's.
func (s *Server) jobOf(r *http.Request, text, creator string, get func(context.Context, int64) (store.Job, error)) (int, any, error) {
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil || id < 1 {
		return 0, nil, notFound("job %q is not known", text)
	}
	j, err := get(r.Context(), id)
	if isNotFound(err) || (err == nil && j.CreatedBy != creator) {
		return 0, nil, notFound("job %d is not known", id)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return http.StatusOK, viewJob(j), nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
