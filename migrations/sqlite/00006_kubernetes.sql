-- Kubernetes partitions: the pkeys ib-kubernetes gives pods' GUIDs through the
-- UFM pkeys API ([ufm_pkeys]), rendered into the same partitions file and
-- applied by the same applier as Neutron's networks. Their pkeys come from
-- [ufm_pkeys] pkey_range, which no Neutron VLAN may use; a GUID in one of
-- them is in no Neutron network's partition, and the reverse.

-- +goose Up
-- One row per Kubernetes pkey, kept when its last member leaves (as UFM does)
-- until it is deleted. ip_over_ib: the partition carries IPoIB (ipoib flag).
CREATE TABLE kubernetes_pkeys (
    pkey       INTEGER  PRIMARY KEY,
    ip_over_ib BOOLEAN  NOT NULL,
    revision   INTEGER  NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);

-- One row per GUID in a Kubernetes pkey. A GUID may be in several of them (a
-- pod's primary pkey, full, and a shared one, limited). membership is 'full'
-- or 'limited'; index0: ib-kubernetes asked for the pkey at index 0 of the
-- GUID's pkey table (written only for an OpenSM that supports it).
CREATE TABLE kubernetes_members (
    pkey       INTEGER  NOT NULL REFERENCES kubernetes_pkeys (pkey) ON DELETE CASCADE,
    guid       TEXT     NOT NULL,
    membership TEXT     NOT NULL CHECK (membership IN ('full', 'limited')),
    index0     BOOLEAN  NOT NULL,
    revision   INTEGER  NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    PRIMARY KEY (pkey, guid)
);
CREATE INDEX kubernetes_members_guid ON kubernetes_members (guid);

-- What UFM's last_updated reports: changed_revision is the revision of the
-- last Kubernetes change, applied_revision the last one OpenSM was seen
-- applying, and last_updated when it was (NULL before the first).
CREATE TABLE kubernetes_state (
    id               INTEGER  PRIMARY KEY CHECK (id = 1),
    changed_revision INTEGER  NOT NULL,
    applied_revision INTEGER  NOT NULL,
    last_updated     DATETIME
);
INSERT INTO kubernetes_state (id, changed_revision, applied_revision) VALUES (1, 0, 0);

-- +goose Down
DROP TABLE kubernetes_state;
DROP TABLE kubernetes_members;
DROP TABLE kubernetes_pkeys;
