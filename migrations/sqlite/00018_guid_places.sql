-- Where each host port GUID of the partitions was seen: the switch port
-- (switch node GUID and port number) OpenSM's subnet dump put it behind when
-- the leader first found it there, or where an operator accepted it
-- (--accept-moved-guid). A GUID later seen behind another switch port is a
-- host presenting another's GUID while that host is down or unplugged (OpenSM
-- then sees no duplicate, and the GUID's partitions follow it to the other
-- switch port) or a host recabled: the gate duplicate_guid holds every job
-- until the GUID is back where it was recorded or an operator accepts the
-- move (internal/applier's moved.go).

-- +goose Up
-- One row a GUID and fabric. moved_to is the switch port ("<switch GUID>:<port>")
-- the GUID was last seen behind instead of its own, empty while it has not
-- been seen elsewhere since it was recorded (or since it was seen back at its
-- own); moved_at when moved_to was last set. The leader writes the rows,
-- fenced by its term; an operator's --accept-moved-guid replaces a row's
-- place. An expand-only table: managers of the previous release ignore it.
CREATE TABLE guid_places (
    fabric      TEXT NOT NULL,
    guid        TEXT NOT NULL,
    switch_guid TEXT NOT NULL,
    switch_port INTEGER NOT NULL,
    recorded_at DATETIME NOT NULL,
    moved_to    TEXT NOT NULL,
    moved_at    DATETIME NOT NULL,
    PRIMARY KEY (fabric, guid)
);

-- +goose Down
DROP TABLE guid_places;
