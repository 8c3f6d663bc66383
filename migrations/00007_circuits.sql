-- +goose Up
-- A product's sale circuit: the invariant watchdog opens it when the stock
-- of the product's current round breaks an invariant (stock below zero, or
-- the ledger disagreeing with initial - stock), and every replica then
-- refuses that product's sales until an admin closes it. Closing records the
-- evidence as seen: the same evidence does not open it again, new evidence
-- (another unit oversold) does. A restock starts a round the circuit does
-- not cover.
CREATE TABLE circuits (
    product_id text        PRIMARY KEY,
    round      int         NOT NULL,
    kind       text        NOT NULL, -- what broke: negative_stock, ledger_mismatch
    quantity   bigint      NOT NULL, -- the evidence: stock, initial and ledger
    initial    bigint      NOT NULL, --   units of the round when it was seen
    sold       bigint      NOT NULL,
    open       boolean     NOT NULL,
    opened_at  timestamptz NOT NULL,
    opened_by  text        NOT NULL, -- the replica whose watchdog saw it
    closed_at  timestamptz NULL
);

-- +goose Down
DROP TABLE circuits;
