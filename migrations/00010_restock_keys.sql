-- +goose Up
-- A restock is safe to retry. A round started by a restock that carried an
-- Idempotency-Key remembers the key, what the request asked (asked_name)
-- and what it answered (name, version), so that a repeat of the request
-- answers the first one's result and starts no round; a key reused for
-- another request is refused. restock_key is the service's own key for
-- every restock, by which one whose COMMIT reply was lost is found.
ALTER TABLE rounds
    ADD COLUMN idempotency_key text   NULL,
    ADD COLUMN asked_name      text   NULL,
    ADD COLUMN name            text   NULL,
    ADD COLUMN version         bigint NULL,
    ADD COLUMN restock_key     text   NULL,
    ADD CONSTRAINT rounds_idempotency_key_key UNIQUE (idempotency_key);
CREATE UNIQUE INDEX rounds_restock_key_key ON rounds (restock_key);

-- +goose Down
DROP INDEX rounds_restock_key_key;
ALTER TABLE rounds
    DROP CONSTRAINT rounds_idempotency_key_key,
    DROP COLUMN restock_key,
    DROP COLUMN version,
    DROP COLUMN name,
    DROP COLUMN asked_name,
    DROP COLUMN idempotency_key;
