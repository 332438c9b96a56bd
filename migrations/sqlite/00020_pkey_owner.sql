-- Several pkeys clients ([ufm_pkeys:NAME]), each its own principal: a
-- Kubernetes pkey belongs to the client that created it, which alone sees
-- and changes it. owner is the client's NAME; '' is the [ufm_pkeys] client
-- (ib-kubernetes), so every pkey recorded before this migration is its own.
--
-- Expand-only: the previous release inserts without owner, which gives its
-- pkeys to the [ufm_pkeys] client, the only one it serves.

-- +goose Up
ALTER TABLE kubernetes_pkeys ADD COLUMN owner TEXT NOT NULL DEFAULT '';

-- +goose Down
-- The pkeys of other clients stay, as the [ufm_pkeys] client's: the previous
-- release knows no other. Delete them first to give them to no one.
ALTER TABLE kubernetes_pkeys DROP COLUMN owner;
