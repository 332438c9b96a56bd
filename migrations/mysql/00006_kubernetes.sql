-- Kubernetes partitions: the pkeys ib-kubernetes gives pods' GUIDs through the
-- UFM pkeys API ([ufm_pkeys]), rendered into the same partitions file and
-- applied by the same applier as Neutron's networks. Their pkeys come from
-- [ufm_pkeys] pkey_range, which no Neutron VLAN may use; a GUID in one of
-- them is in no Neutron network's partition, and the reverse.
-- MariaDB commits each DDL statement on its own, so every statement here can be
-- run again after a partial failure (IF NOT EXISTS, INSERT IGNORE).

-- +goose Up
-- One row per Kubernetes pkey, kept when its last member leaves (as UFM does)
-- until it is deleted. ip_over_ib: the partition carries IPoIB (ipoib flag).
CREATE TABLE IF NOT EXISTS kubernetes_pkeys (
    pkey       int         NOT NULL PRIMARY KEY,
    ip_over_ib boolean     NOT NULL,
    revision   bigint      NOT NULL,
    created_at datetime(6) NOT NULL,
    updated_at datetime(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- One row per GUID in a Kubernetes pkey. A GUID may be in several of them (a
-- pod's primary pkey, full, and a shared one, limited). membership is 'full'
-- or 'limited'; index0: ib-kubernetes asked for the pkey at index 0 of the
-- GUID's pkey table (written only for an OpenSM that supports it).
CREATE TABLE IF NOT EXISTS kubernetes_members (
    pkey       int         NOT NULL,
    guid       varchar(18) NOT NULL,
    membership varchar(8)  NOT NULL CHECK (membership IN ('full', 'limited')),
    index0     boolean     NOT NULL,
    revision   bigint      NOT NULL,
    created_at datetime(6) NOT NULL,
    updated_at datetime(6) NOT NULL,
    PRIMARY KEY (pkey, guid),
    INDEX kubernetes_members_guid (guid),
    CONSTRAINT kubernetes_members_pkey_fk FOREIGN KEY (pkey) REFERENCES kubernetes_pkeys (pkey) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- What UFM's last_updated reports: changed_revision is the revision of the
-- last Kubernetes change, applied_revision the last one OpenSM was seen
-- applying, and last_updated when it was (NULL before the first).
CREATE TABLE IF NOT EXISTS kubernetes_state (
    id               smallint    PRIMARY KEY CHECK (id = 1),
    changed_revision bigint      NOT NULL,
    applied_revision bigint      NOT NULL,
    last_updated     datetime(6) NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT IGNORE INTO kubernetes_state (id, changed_revision, applied_revision) VALUES (1, 0, 0);

-- +goose Down
DROP TABLE IF EXISTS kubernetes_state;
DROP TABLE IF EXISTS kubernetes_members;
DROP TABLE IF EXISTS kubernetes_pkeys;
