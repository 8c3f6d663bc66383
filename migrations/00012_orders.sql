-- +goose Up
-- An order's life after its sale. A sale asked with pay_within is a hold:
-- its ledger row (sales) is written as any sale's, by the same statement
-- that writes an orders row in state 'held' with its deadline. The units
-- come back only by a return (cancel, expiry, refund), which is a row of
-- returns, never an edit of the ledger.
CREATE TABLE orders (
    id         uuid        PRIMARY KEY,
    sale_id    bigint      NOT NULL UNIQUE REFERENCES sales (id),
    product_id text        NOT NULL REFERENCES stock (product_id),
    round      int         NOT NULL,
    quantity   int         NOT NULL CHECK (quantity > 0),
    state      text        NOT NULL CHECK (state IN ('held', 'paid', 'shipped', 'cancelled', 'expired', 'refunded')),
    expires_at timestamptz NOT NULL, -- Postgres's clock: pay only before it
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- The expiry sweep's look-up: the held orders by deadline.
CREATE INDEX orders_held_by_deadline ON orders (expires_at) WHERE state = 'held';

-- Each state an order entered, once: the primary key refuses a second
-- entry into the same state, whoever writes it.
CREATE TABLE order_events (
    order_id uuid        NOT NULL REFERENCES orders (id),
    state    text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    by       text        NOT NULL, -- the instance, or the job that wrote it
    fence    bigint      NULL,     -- the expiry job's fencing token
    PRIMARY KEY (order_id, state)
);

-- The units of a cancelled, expired or refunded order, returned at most
-- once (the primary key). restored: whether they went back into the stock;
-- an order of a round a restock has ended returns nothing to the new one.
CREATE TABLE returns (
    order_id   uuid        PRIMARY KEY REFERENCES orders (id),
    product_id text        NOT NULL,
    round      int         NOT NULL,
    quantity   int         NOT NULL CHECK (quantity > 0),
    reason     text        NOT NULL CHECK (reason IN ('cancelled', 'expired', 'refunded')),
    restored   boolean     NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX returns_product_round ON returns (product_id, round);

-- The units of a round given back to its stock: initial - quantity =
-- units - returned, for every round.
ALTER TABLE round_totals ADD COLUMN returned bigint NOT NULL DEFAULT 0;

-- The fencing token of each periodic job's runner (the expiry sweep), per
-- lock counter: a runner's write claims it, and one whose token is older
-- than the last claim is refused.
CREATE TABLE job_fences (
    job     text   NOT NULL,
    backend text   NOT NULL,
    token   bigint NOT NULL,
    PRIMARY KEY (job, backend)
);

-- +goose Down
DROP TABLE job_fences;
ALTER TABLE round_totals DROP COLUMN returned;
DROP TABLE returns;
DROP TABLE order_events;
DROP TABLE orders;
