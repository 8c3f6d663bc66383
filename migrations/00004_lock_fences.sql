-- +goose Up
-- One fence per lock backend (see 00003_locks.sql for why they are kept
-- apart): the highest fencing token a sale claimed the product's row with,
-- under a lock of redlock (a counter kept on a quorum of the Redlock
-- servers), etcd (the lock key's create revision), ZooKeeper (the lock
-- node's czxid) and the fair Redis lock.
ALTER TABLE stock
    ADD COLUMN redlock_fence   bigint NOT NULL DEFAULT 0,
    ADD COLUMN etcd_fence      bigint NOT NULL DEFAULT 0,
    ADD COLUMN zookeeper_fence bigint NOT NULL DEFAULT 0,
    ADD COLUMN fair_fence      bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE stock
    DROP COLUMN redlock_fence,
    DROP COLUMN etcd_fence,
    DROP COLUMN zookeeper_fence,
    DROP COLUMN fair_fence;
