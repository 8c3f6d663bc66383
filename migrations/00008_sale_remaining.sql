-- +goose Up
-- The stock a sale left, as its answer said: a sale whose COMMIT reply was
-- lost and is found in the ledger afterwards is answered with what it left,
-- not with the stock of the moment it was found (an untrue answer once other
-- sales followed). NULL for batch rows (their answers are computed from the
-- batch) and rows written before this column.
ALTER TABLE sales ADD COLUMN remaining bigint NULL;

-- +goose Down
ALTER TABLE sales DROP COLUMN remaining;
