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
--
-- MariaDB commits each DDL statement on its own: a column or an index added,
-- or a key swapped, can be added again after a crash part-way (IF [NOT]
-- EXISTS; a primary key swap drops whichever key the table has).

-- +goose Up
ALTER TABLE state ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE state DROP PRIMARY KEY, ADD PRIMARY KEY (fabric);

ALTER TABLE networks ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
CREATE UNIQUE INDEX IF NOT EXISTS networks_fabric_pkey ON networks (fabric, pkey);
CREATE UNIQUE INDEX IF NOT EXISTS networks_id_fabric ON networks (id, fabric);
DROP INDEX IF EXISTS pkey ON networks;
DROP INDEX IF EXISTS networks_revision ON networks;
CREATE INDEX IF NOT EXISTS networks_revision ON networks (fabric, revision);

-- A port's fabric is its network's: the foreign key keeps the copy honest.
ALTER TABLE ports ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
CREATE UNIQUE INDEX IF NOT EXISTS ports_fabric_guid ON ports (fabric, guid);
DROP INDEX IF EXISTS guid ON ports;
ALTER TABLE ports DROP FOREIGN KEY ports_network_fk;
CREATE INDEX IF NOT EXISTS ports_network_fabric ON ports (network_id, fabric);
ALTER TABLE ports ADD CONSTRAINT ports_network_fabric_fk FOREIGN KEY (network_id, fabric)
    REFERENCES networks (id, fabric) ON DELETE CASCADE;
DROP INDEX IF EXISTS ports_revision ON ports;
CREATE INDEX IF NOT EXISTS ports_revision ON ports (fabric, revision);

ALTER TABLE jobs ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS jobs_status_revision ON jobs;
CREATE INDEX IF NOT EXISTS jobs_status_revision ON jobs (fabric, status, revision);
DROP INDEX IF EXISTS jobs_status_finished_at ON jobs;
CREATE INDEX IF NOT EXISTS jobs_status_finished_at ON jobs (fabric, status, finished_at);
-- jobs_fabric_id: a fabric's newest job (NewestJobID), read at every snapshot.
CREATE INDEX IF NOT EXISTS jobs_fabric_id ON jobs (fabric, id);

ALTER TABLE applies ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
CREATE INDEX IF NOT EXISTS applies_fabric_id ON applies (fabric, id);

ALTER TABLE leadership ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE leadership DROP PRIMARY KEY, ADD PRIMARY KEY (fabric);

ALTER TABLE secrets ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE secrets DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, name);

ALTER TABLE expected_switches ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE expected_switches DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, guid);

ALTER TABLE enforcement_errors ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE enforcement_errors DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, switch_guid, port);

ALTER TABLE kubernetes_pkeys ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE kubernetes_members ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE kubernetes_members DROP FOREIGN KEY kubernetes_members_pkey_fk;
ALTER TABLE kubernetes_pkeys DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, pkey);
ALTER TABLE kubernetes_members DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, pkey, guid);
ALTER TABLE kubernetes_members ADD CONSTRAINT kubernetes_members_fabric_pkey_fk FOREIGN KEY (fabric, pkey)
    REFERENCES kubernetes_pkeys (fabric, pkey) ON DELETE CASCADE;
DROP INDEX IF EXISTS kubernetes_members_guid ON kubernetes_members;
-- pkey last: the GUID's memberships in pkey order, without SQLite choosing the
-- primary key's (fabric, pkey, guid) and scanning the fabric's every member.
CREATE INDEX IF NOT EXISTS kubernetes_members_guid ON kubernetes_members (fabric, guid, pkey);

ALTER TABLE kubernetes_state ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE kubernetes_state DROP PRIMARY KEY, ADD PRIMARY KEY (fabric);

ALTER TABLE adopted_partitions ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE adopted_partitions DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, pkey);

ALTER TABLE last_audit ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE last_audit DROP PRIMARY KEY, ADD PRIMARY KEY (fabric);

ALTER TABLE second_subnet_managers ADD COLUMN IF NOT EXISTS fabric varchar(32) NOT NULL DEFAULT 'default';
ALTER TABLE second_subnet_managers DROP PRIMARY KEY, ADD PRIMARY KEY (fabric, port_guid);

-- Job ids are given across fabrics (networking-mlnx reads a job by its id
-- alone), while each fabric's changes hold only their own revision's row
-- lock: InsertJob's "highest id plus one" would give two fabrics' changes one
-- id. Each change locks this one row right before it inserts its job
-- (LockJobIDs), so jobs are inserted one at a time across fabrics, and only
-- for the moment from a job's insert to its transaction's commit.
CREATE TABLE job_ids (
    id int PRIMARY KEY CHECK (id = 1),
    n  bigint NOT NULL
);
INSERT INTO job_ids (id, n) VALUES (1, 0);

-- +goose Down
DROP TABLE job_ids;
-- Dropping the column would merge the fabrics' pkeys and GUIDs into one
-- unique space: refused while any row is another fabric's.
-- +goose StatementBegin
BEGIN NOT ATOMIC
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
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
            'migration 00013 down refused: the database holds rows of fabrics other than default; delete them first (one fabric per database before 00013)';
    END IF;
END;
-- +goose StatementEnd

ALTER TABLE second_subnet_managers DROP PRIMARY KEY, ADD PRIMARY KEY (port_guid);
ALTER TABLE second_subnet_managers DROP COLUMN IF EXISTS fabric;
ALTER TABLE last_audit DROP PRIMARY KEY, ADD PRIMARY KEY (id);
ALTER TABLE last_audit DROP COLUMN IF EXISTS fabric;
ALTER TABLE adopted_partitions DROP PRIMARY KEY, ADD PRIMARY KEY (pkey);
ALTER TABLE adopted_partitions DROP COLUMN IF EXISTS fabric;
ALTER TABLE kubernetes_state DROP PRIMARY KEY, ADD PRIMARY KEY (id);
ALTER TABLE kubernetes_state DROP COLUMN IF EXISTS fabric;

ALTER TABLE kubernetes_members DROP INDEX IF EXISTS kubernetes_members_guid;
ALTER TABLE kubernetes_members ADD INDEX IF NOT EXISTS kubernetes_members_guid (guid);
ALTER TABLE kubernetes_members DROP FOREIGN KEY IF EXISTS kubernetes_members_fabric_pkey_fk;
ALTER TABLE kubernetes_members DROP PRIMARY KEY, ADD PRIMARY KEY (pkey, guid);
ALTER TABLE kubernetes_pkeys DROP PRIMARY KEY, ADD PRIMARY KEY (pkey);
ALTER TABLE kubernetes_members ADD CONSTRAINT kubernetes_members_pkey_fk FOREIGN KEY IF NOT EXISTS (pkey)
    REFERENCES kubernetes_pkeys (pkey) ON DELETE CASCADE;
ALTER TABLE kubernetes_members DROP INDEX IF EXISTS kubernetes_members_fabric_pkey_fk;
ALTER TABLE kubernetes_members DROP COLUMN IF EXISTS fabric;
ALTER TABLE kubernetes_pkeys DROP COLUMN IF EXISTS fabric;

ALTER TABLE enforcement_errors DROP PRIMARY KEY, ADD PRIMARY KEY (switch_guid, port);
ALTER TABLE enforcement_errors DROP COLUMN IF EXISTS fabric;
ALTER TABLE expected_switches DROP PRIMARY KEY, ADD PRIMARY KEY (guid);
ALTER TABLE expected_switches DROP COLUMN IF EXISTS fabric;
ALTER TABLE secrets DROP PRIMARY KEY, ADD PRIMARY KEY (name);
ALTER TABLE secrets DROP COLUMN IF EXISTS fabric;
ALTER TABLE leadership DROP PRIMARY KEY, ADD PRIMARY KEY (id);
ALTER TABLE leadership DROP COLUMN IF EXISTS fabric;

ALTER TABLE applies DROP INDEX IF EXISTS applies_fabric_id;
ALTER TABLE applies DROP COLUMN IF EXISTS fabric;

ALTER TABLE jobs DROP INDEX IF EXISTS jobs_fabric_id;
ALTER TABLE jobs DROP INDEX IF EXISTS jobs_status_finished_at;
ALTER TABLE jobs ADD INDEX IF NOT EXISTS jobs_status_finished_at (status, finished_at);
ALTER TABLE jobs DROP INDEX IF EXISTS jobs_status_revision;
ALTER TABLE jobs ADD INDEX IF NOT EXISTS jobs_status_revision (status, revision);
ALTER TABLE jobs DROP COLUMN IF EXISTS fabric;

ALTER TABLE ports DROP INDEX IF EXISTS ports_revision;
ALTER TABLE ports ADD INDEX IF NOT EXISTS ports_revision (revision);
ALTER TABLE ports DROP FOREIGN KEY IF EXISTS ports_network_fabric_fk;
ALTER TABLE ports DROP INDEX IF EXISTS ports_network_fabric;
ALTER TABLE ports ADD UNIQUE INDEX IF NOT EXISTS guid (guid);
ALTER TABLE ports DROP INDEX IF EXISTS ports_fabric_guid;
ALTER TABLE ports DROP COLUMN IF EXISTS fabric;
ALTER TABLE networks DROP INDEX IF EXISTS networks_revision;
ALTER TABLE networks ADD INDEX IF NOT EXISTS networks_revision (revision);
ALTER TABLE networks ADD UNIQUE INDEX IF NOT EXISTS pkey (pkey);
ALTER TABLE networks DROP INDEX IF EXISTS networks_fabric_pkey;
ALTER TABLE networks DROP INDEX IF EXISTS networks_id_fabric;
ALTER TABLE networks DROP COLUMN IF EXISTS fabric;
ALTER TABLE ports ADD CONSTRAINT ports_network_fk FOREIGN KEY IF NOT EXISTS (network_id)
    REFERENCES networks (id) ON DELETE CASCADE;

ALTER TABLE state DROP PRIMARY KEY, ADD PRIMARY KEY (id);
ALTER TABLE state DROP COLUMN IF EXISTS fabric;
