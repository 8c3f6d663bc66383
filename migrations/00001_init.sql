-- +goose Up
-- stock holds one row per product. There is deliberately no
-- CHECK (quantity >= 0): the unsafe strategies must be able to drive stock
-- negative, or the demo could not show their oversell. fence is the highest
-- fencing token a lock holder has written with (reentrant strategy).
CREATE TABLE stock (
    product_id text PRIMARY KEY,
    name       text        NOT NULL DEFAULT '',
    quantity   bigint      NOT NULL,
    initial    bigint      NOT NULL,
    version    bigint      NOT NULL DEFAULT 0,
    round      int         NOT NULL DEFAULT 1,
    fence      bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- sales is the ledger: one row per successful sale, written in the same
-- transaction as the decrement, never deleted; a restock starts a new round.
CREATE TABLE sales (
    id              bigserial   PRIMARY KEY,
    product_id      text        NOT NULL REFERENCES stock (product_id),
    round           int         NOT NULL,
    quantity        int         NOT NULL CHECK (quantity > 0),
    strategy        text        NOT NULL,
    instance        text        NOT NULL,
    idempotency_key text        NULL,
    fence           bigint      NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sales_idempotency_key_key UNIQUE (idempotency_key)
);

CREATE INDEX sales_product_round_idx ON sales (product_id, round);

-- +goose Down
DROP TABLE sales;
DROP TABLE stock;
