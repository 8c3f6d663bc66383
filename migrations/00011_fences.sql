-- +goose Up
-- fences holds, per product and per fencing counter, the highest fencing
-- token a lock holder claimed the product's stock row with. A counter is
-- named by the lock's Fence.Backend (internal/lock): "redislock" (redis,
-- reentrant and handoff share it), "redislock/fair", "redlock", "etcdlock",
-- "zklock", "pglock", and whatever a new backend calls its own. Tokens of
-- two counters say nothing about each other's order, so each keeps its own
-- row; before, each had a column of stock, and a new backend needed one.
-- A claim still takes the stock row's lock first and then this row's, so
-- holders of every backend serialise on the stock row as before.
CREATE TABLE fences (
    product_id text   NOT NULL REFERENCES stock (product_id),
    backend    text   NOT NULL,
    token      bigint NOT NULL,
    PRIMARY KEY (product_id, backend)
);

INSERT INTO fences (product_id, backend, token)
SELECT s.product_id, f.backend, f.token
FROM stock s, LATERAL (VALUES
    ('redislock', s.fence),
    ('redislock/fair', s.fair_fence),
    ('pglock', s.pglock_fence),
    ('redlock', s.redlock_fence),
    ('etcdlock', s.etcd_fence),
    ('zklock', s.zookeeper_fence)) AS f (backend, token)
WHERE f.token > 0;

ALTER TABLE stock
    DROP COLUMN fence,
    DROP COLUMN fair_fence,
    DROP COLUMN pglock_fence,
    DROP COLUMN redlock_fence,
    DROP COLUMN etcd_fence,
    DROP COLUMN zookeeper_fence;

-- +goose Down
-- The columns come back with the tokens of the six counters they held; a
-- counter of a backend added since has no column, and its rows are lost.
ALTER TABLE stock
    ADD COLUMN fence           bigint NOT NULL DEFAULT 0,
    ADD COLUMN fair_fence      bigint NOT NULL DEFAULT 0,
    ADD COLUMN pglock_fence    bigint NOT NULL DEFAULT 0,
    ADD COLUMN redlock_fence   bigint NOT NULL DEFAULT 0,
    ADD COLUMN etcd_fence      bigint NOT NULL DEFAULT 0,
    ADD COLUMN zookeeper_fence bigint NOT NULL DEFAULT 0;

UPDATE stock s SET
    fence           = coalesce((SELECT token FROM fences f WHERE f.product_id = s.product_id AND f.backend = 'redislock'), 0),
    fair_fence      = coalesce((SELECT token FROM fences f WHERE f.product_id = s.product_id AND f.backend = 'redislock/fair'), 0),
    pglock_fence    = coalesce((SELECT token FROM fences f WHERE f.product_id = s.product_id AND f.backend = 'pglock'), 0),
    redlock_fence   = coalesce((SELECT token FROM fences f WHERE f.product_id = s.product_id AND f.backend = 'redlock'), 0),
    etcd_fence      = coalesce((SELECT token FROM fences f WHERE f.product_id = s.product_id AND f.backend = 'etcdlock'), 0),
    zookeeper_fence = coalesce((SELECT token FROM fences f WHERE f.product_id = s.product_id AND f.backend = 'zklock'), 0);

DROP TABLE fences;
