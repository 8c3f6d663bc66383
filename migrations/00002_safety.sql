-- +goose Up
-- Every sale carries a unique key (the buyer's Idempotency-Key or one the
-- service makes up), so that a sale whose COMMIT reply was lost can be found
-- in the ledger before the buyer is answered.
ALTER TABLE sales ADD COLUMN sale_key text NULL;
CREATE UNIQUE INDEX sales_sale_key_key ON sales (sale_key);

-- rounds remembers each round's initial stock, so that every round's
-- invariants (ledger units <= initial) can be checked from the database
-- after a restock has started the next one.
CREATE TABLE rounds (
    product_id text        NOT NULL REFERENCES stock (product_id),
    round      int         NOT NULL,
    initial    bigint      NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (product_id, round)
);
INSERT INTO rounds (product_id, round, initial, started_at)
SELECT product_id, round, initial, updated_at FROM stock;

-- settings is the durable copy of fleet-wide settings (the default
-- strategy); Redis holds a cache of it that may be lost.
CREATE TABLE settings (
    name       text        PRIMARY KEY,
    value      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE settings;
DROP TABLE rounds;
DROP INDEX sales_sale_key_key;
ALTER TABLE sales DROP COLUMN sale_key;
