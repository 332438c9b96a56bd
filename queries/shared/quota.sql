-- Bounded storage per principal: see migrations' 00025_job_quota.

-- The newest job of an object that its creator may read: what a change that
-- changes nothing answers (store's unchanged), through jobs_object.
-- name: NewestJobOf :one
SELECT id, revision, object_type, object_id, network_id, operation, status, description, result, error, created_by,
       request, created_at, updated_at, started_at, finished_at, request_id, fabric
FROM jobs
WHERE object_id = @object_id AND object_type = @object_type AND fabric = @fabric AND created_by = @created_by
ORDER BY id DESC LIMIT 1;

-- A Kubernetes change that changes nothing, answered while every Kubernetes
-- change is applied, moves last_updated to @at (never back): ib-kubernetes
-- holds its next change until last_updated is after its last call.
-- name: MarkKubernetesUnchanged :execrows
UPDATE kubernetes_state SET last_updated = @at
WHERE fabric = @fabric AND applied_revision = changed_revision AND (last_updated IS NULL OR last_updated < @at);
