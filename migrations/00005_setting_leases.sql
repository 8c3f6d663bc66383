-- +goose Up
-- The fleet default is Postgres's alone: every switch bumps its version,
-- and each replica sells with a copy only while it holds a lease on the
-- version it read. setting_leases says which replica holds which version
-- until when, so a switch can return as soon as every lease still running
-- is on the new version (at the latest when the old leases run out).
ALTER TABLE settings ADD COLUMN version bigint NOT NULL DEFAULT 1;

CREATE TABLE setting_leases (
    holder     text        PRIMARY KEY, -- one per replica process
    instance   text        NOT NULL,    -- INVENTORY_INSTANCE, for people
    version    bigint      NOT NULL,    -- the version the replica uses
    expires_at timestamptz NOT NULL     -- Postgres's clock
);

-- +goose Down
DROP TABLE setting_leases;
ALTER TABLE settings DROP COLUMN version;
