-- Several fabrics, one manager: every fabric-owned row names its fabric, and
-- the keys and unique constraints hold per fabric (two fabrics may use one
-- pkey and one GUID). Every existing row becomes the default fabric's and is
-- otherwise untouched. state, leadership and kubernetes_state keep one row a
-- fabric (one revision counter, one lease, one Kubernetes state each); their
-- id column stays 1.
--
-- A network on no configured fabric (managed = false) is the default
-- fabric's: it has no pkey and its ports no GUID, so it takes no per-fabric
-- key, and a NULL fabric would make every key, foreign key and query handle
-- NULL for rows nothing applies.

-- +goose Up
ALTER TABLE state ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE state DROP CONSTRAINT state_pkey, ADD PRIMARY KEY (fabric);

-- The notification names the fabric whose revision changed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION afm_notify_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('afm_revision', NEW.fabric || ':' || NEW.revision::text);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

ALTER TABLE networks ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE networks DROP CONSTRAINT networks_pkey_key;
ALTER TABLE networks ADD CONSTRAINT networks_fabric_pkey UNIQUE (fabric, pkey);
ALTER TABLE networks ADD CONSTRAINT networks_id_fabric UNIQUE (id, fabric);
DROP INDEX networks_revision;
CREATE INDEX networks_revision ON networks (fabric, revision);

-- A port's fabric is its network's: the foreign key keeps the copy honest.
ALTER TABLE ports ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE ports DROP CONSTRAINT ports_guid_key;
ALTER TABLE ports ADD CONSTRAINT ports_fabric_guid UNIQUE (fabric, guid);
ALTER TABLE ports DROP CONSTRAINT ports_network_id_fkey;
ALTER TABLE ports ADD CONSTRAINT ports_network_fabric_fkey FOREIGN KEY (network_id, fabric)
    REFERENCES networks (id, fabric) ON DELETE CASCADE;
DROP INDEX ports_revision;
CREATE INDEX ports_revision ON ports (fabric, revision);

ALTER TABLE jobs ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
DROP INDEX jobs_status_revision;
CREATE INDEX jobs_status_revision ON jobs (fabric, status, revision);
DROP INDEX jobs_status_finished_at;
CREATE INDEX jobs_status_finished_at ON jobs (fabric, status, finished_at);
-- jobs_fabric_id: a fabric's newest job (NewestJobID), read at every snapshot.
CREATE INDEX jobs_fabric_id ON jobs (fabric, id);

ALTER TABLE applies ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
CREATE INDEX applies_fabric_id ON applies (fabric, id);

ALTER TABLE leadership ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE leadership DROP CONSTRAINT leadership_pkey, ADD PRIMARY KEY (fabric);

ALTER TABLE secrets ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE secrets DROP CONSTRAINT secrets_pkey, ADD PRIMARY KEY (fabric, name);

ALTER TABLE expected_switches ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE expected_switches DROP CONSTRAINT expected_switches_pkey, ADD PRIMARY KEY (fabric, guid);

ALTER TABLE enforcement_errors ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE enforcement_errors DROP CONSTRAINT enforcement_errors_pkey, ADD PRIMARY KEY (fabric, switch_guid, port);

ALTER TABLE kubernetes_pkeys ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE kubernetes_members ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE kubernetes_members DROP CONSTRAINT kubernetes_members_pkey_fkey;
ALTER TABLE kubernetes_pkeys DROP CONSTRAINT kubernetes_pkeys_pkey, ADD PRIMARY KEY (fabric, pkey);
ALTER TABLE kubernetes_members DROP CONSTRAINT kubernetes_members_pkey, ADD PRIMARY KEY (fabric, pkey, guid);
ALTER TABLE kubernetes_members ADD CONSTRAINT kubernetes_members_fabric_pkey_fkey FOREIGN KEY (fabric, pkey)
    REFERENCES kubernetes_pkeys (fabric, pkey) ON DELETE CASCADE;
DROP INDEX kubernetes_members_guid;
-- pkey last: the GUID's memberships in pkey order, without SQLite choosing the
-- primary key's (fabric, pkey, guid) and scanning the fabric's every member.
CREATE INDEX kubernetes_members_guid ON kubernetes_members (fabric, guid, pkey);

ALTER TABLE kubernetes_state ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE kubernetes_state DROP CONSTRAINT kubernetes_state_pkey, ADD PRIMARY KEY (fabric);

ALTER TABLE adopted_partitions ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE adopted_partitions DROP CONSTRAINT adopted_partitions_pkey, ADD PRIMARY KEY (fabric, pkey);

ALTER TABLE last_audit ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE last_audit DROP CONSTRAINT last_audit_pkey, ADD PRIMARY KEY (fabric);

ALTER TABLE second_subnet_managers ADD COLUMN fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE second_subnet_managers DROP CONSTRAINT second_subnet_managers_pkey, ADD PRIMARY KEY (fabric, port_guid);

-- The previous release's upserts name the old keys (ON CONFLICT (name) on
-- secrets, ...), which PostgreSQL and SQLite find only as a unique index of
-- exactly those columns: these keep them found while the database serves
-- the default fabric only, so that the previous release still runs on this
-- schema during a rolling upgrade. A manager drops them when it first
-- serves a second fabric (store.EnsureFabrics), whose rows may repeat them.
CREATE UNIQUE INDEX secrets_name_legacy ON secrets (name);
CREATE UNIQUE INDEX enforcement_errors_legacy ON enforcement_errors (switch_guid, port);
CREATE UNIQUE INDEX kubernetes_pkeys_legacy ON kubernetes_pkeys (pkey);
CREATE UNIQUE INDEX kubernetes_members_legacy ON kubernetes_members (pkey, guid);
CREATE UNIQUE INDEX adopted_partitions_legacy ON adopted_partitions (pkey);
CREATE UNIQUE INDEX last_audit_legacy ON last_audit (id);

-- Job ids are given across fabrics (networking-mlnx reads a job by its id
-- alone), while each fabric's changes hold only their own revision's row
-- lock: InsertJob's "highest id plus one" would give two fabrics' changes one
-- id. Each change locks this one row right before it inserts its job
-- (LockJobIDs), so jobs are inserted one at a time across fabrics, and only
-- for the moment from a job's insert to its transaction's commit.
CREATE TABLE job_ids (
    id integer PRIMARY KEY CHECK (id = 1),
    n  bigint NOT NULL
);
INSERT INTO job_ids (id, n) VALUES (1, 0);

-- +goose Down
DROP TABLE job_ids;
-- Dropping the column would merge the fabrics' pkeys and GUIDs into one
-- unique space: refused while any row is another fabric's.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM state WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM networks WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM ports WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM jobs WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM applies WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM leadership WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM secrets WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM expected_switches WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM enforcement_errors WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM kubernetes_pkeys WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM kubernetes_members WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM kubernetes_state WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM adopted_partitions WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM last_audit WHERE fabric <> 'default')
        OR EXISTS (SELECT 1 FROM second_subnet_managers WHERE fabric <> 'default') THEN
        RAISE EXCEPTION 'migration 00013 down refused: the database holds rows of fabrics other than default; delete them first (one fabric per database before 00013)';
    END IF;
END;
$$;
-- +goose StatementEnd

DROP INDEX IF EXISTS secrets_name_legacy;
DROP INDEX IF EXISTS enforcement_errors_legacy;
DROP INDEX IF EXISTS kubernetes_pkeys_legacy;
DROP INDEX IF EXISTS kubernetes_members_legacy;
DROP INDEX IF EXISTS adopted_partitions_legacy;
DROP INDEX IF EXISTS last_audit_legacy;

ALTER TABLE second_subnet_managers DROP CONSTRAINT second_subnet_managers_pkey, ADD PRIMARY KEY (port_guid);
ALTER TABLE second_subnet_managers DROP COLUMN fabric;
ALTER TABLE last_audit DROP CONSTRAINT last_audit_pkey, ADD PRIMARY KEY (id);
ALTER TABLE last_audit DROP COLUMN fabric;
ALTER TABLE adopted_partitions DROP CONSTRAINT adopted_partitions_pkey, ADD PRIMARY KEY (pkey);
ALTER TABLE adopted_partitions DROP COLUMN fabric;
ALTER TABLE kubernetes_state DROP CONSTRAINT kubernetes_state_pkey, ADD PRIMARY KEY (id);
ALTER TABLE kubernetes_state DROP COLUMN fabric;

DROP INDEX kubernetes_members_guid;
CREATE INDEX kubernetes_members_guid ON kubernetes_members (guid);
ALTER TABLE kubernetes_members DROP CONSTRAINT kubernetes_members_fabric_pkey_fkey;
ALTER TABLE kubernetes_members DROP CONSTRAINT kubernetes_members_pkey, ADD PRIMARY KEY (pkey, guid);
ALTER TABLE kubernetes_pkeys DROP CONSTRAINT kubernetes_pkeys_pkey, ADD PRIMARY KEY (pkey);
ALTER TABLE kubernetes_members ADD CONSTRAINT kubernetes_members_pkey_fkey FOREIGN KEY (pkey)
    REFERENCES kubernetes_pkeys (pkey) ON DELETE CASCADE;
ALTER TABLE kubernetes_members DROP COLUMN fabric;
ALTER TABLE kubernetes_pkeys DROP COLUMN fabric;

ALTER TABLE enforcement_errors DROP CONSTRAINT enforcement_errors_pkey, ADD PRIMARY KEY (switch_guid, port);
ALTER TABLE enforcement_errors DROP COLUMN fabric;
ALTER TABLE expected_switches DROP CONSTRAINT expected_switches_pkey, ADD PRIMARY KEY (guid);
ALTER TABLE expected_switches DROP COLUMN fabric;
ALTER TABLE secrets DROP CONSTRAINT secrets_pkey, ADD PRIMARY KEY (name);
ALTER TABLE secrets DROP COLUMN fabric;
ALTER TABLE leadership DROP CONSTRAINT leadership_pkey, ADD PRIMARY KEY (id);
ALTER TABLE leadership DROP COLUMN fabric;

DROP INDEX applies_fabric_id;
ALTER TABLE applies DROP COLUMN fabric;

DROP INDEX jobs_fabric_id;
DROP INDEX jobs_status_finished_at;
CREATE INDEX jobs_status_finished_at ON jobs (status, finished_at);
DROP INDEX jobs_status_revision;
CREATE INDEX jobs_status_revision ON jobs (status, revision);
ALTER TABLE jobs DROP COLUMN fabric;

DROP INDEX ports_revision;
CREATE INDEX ports_revision ON ports (revision);
ALTER TABLE ports DROP CONSTRAINT ports_network_fabric_fkey;
ALTER TABLE ports DROP CONSTRAINT ports_fabric_guid;
ALTER TABLE ports ADD CONSTRAINT ports_guid_key UNIQUE (guid);
ALTER TABLE ports DROP COLUMN fabric;
DROP INDEX networks_revision;
CREATE INDEX networks_revision ON networks (revision);
ALTER TABLE networks DROP CONSTRAINT networks_id_fabric;
ALTER TABLE networks DROP CONSTRAINT networks_fabric_pkey;
ALTER TABLE networks ADD CONSTRAINT networks_pkey_key UNIQUE (pkey);
ALTER TABLE networks DROP COLUMN fabric;
ALTER TABLE ports ADD CONSTRAINT ports_network_id_fkey FOREIGN KEY (network_id)
    REFERENCES networks (id) ON DELETE CASCADE;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION afm_notify_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('afm_revision', NEW.revision::text);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
ALTER TABLE state DROP CONSTRAINT state_pkey, ADD PRIMARY KEY (id);
ALTER TABLE state DROP COLUMN fabric;
