-- +goose Up
-- The live page's order counts: for each of the products it shows, how
-- many orders of the product's current round are in each state. Without
-- this index that count reads every row of orders (the only other indexes
-- are the id, the sale and the held orders by deadline); with it, it reads
-- the round's index entries of the product and nothing else (an
-- index-only scan where the visibility map allows). It costs a hold one
-- more index entry, and each step one more (a step changes state, and an
-- update that changes an indexed column writes a new entry in every index
-- of the table: already so for orders_held_by_deadline, whose predicate
-- reads state).
--
-- Built inside the migration's transaction, not CONCURRENTLY: orders is
-- new in 00012, in the same release, so there is nothing to wait for.
CREATE INDEX orders_product_round_state ON orders (product_id, round, state);

-- +goose Down
DROP INDEX orders_product_round_state;
