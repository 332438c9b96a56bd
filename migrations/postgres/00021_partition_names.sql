-- The name a client gave a Kubernetes pkey (UFM's partition_name on a POST
-- of /resources/pkeys): the pkeys API's reads return it as the pkey's
-- partition. NULL: none was given, and the reads name the partition as the
-- partitions file does (k8s-<pkey>). An expand-only column: managers of the
-- previous release ignore it.

-- +goose Up
ALTER TABLE kubernetes_pkeys ADD COLUMN partition_name varchar(64);

-- +goose Down
ALTER TABLE kubernetes_pkeys DROP COLUMN partition_name;
