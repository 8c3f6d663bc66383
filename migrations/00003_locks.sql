-- +goose Up
-- locks is the pglock lock table (internal/lock/pglock): one row per lock
-- name. token is the holder's random token, NULL when nobody holds it;
-- expires_at is the lease's end on Postgres' clock; fence counts the
-- acquisitions. A release clears token but keeps the row, so fence never
-- goes backwards, across take-overs and releases alike: do not delete rows.
CREATE TABLE locks (
    name        text        PRIMARY KEY,
    token       text        NULL,
    fence       bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL
);

-- pglock_fence is the highest pglock fencing token a sale claimed the
-- product's row with. It is kept apart from fence (the Redis locks'
-- tokens): the two counters are independent, so comparing a token from
-- one with the other's would refuse honest holders.
ALTER TABLE stock ADD COLUMN pglock_fence bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE stock DROP COLUMN pglock_fence;
DROP TABLE locks;
