-- +goose Up
-- A replica answers "sold out" from memory only for a mark recorded here,
-- while it runs (expires_at, Postgres's clock; the replica's own copy ends
-- earlier). A restock waits until no mark of an older round is running, so
-- once it has been answered no replica answers sold-out for an old round.
CREATE TABLE soldout_marks (
    holder     text        NOT NULL, -- one per replica process
    product_id text        NOT NULL,
    round      int         NOT NULL, -- the round the stock row showed empty
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (product_id, holder)
);

-- +goose Down
DROP TABLE soldout_marks;
