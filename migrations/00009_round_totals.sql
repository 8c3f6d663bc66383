-- +goose Up
-- round_totals is the ledger's sum for each product and round: the units its
-- sales sold and how many sales they were. The statement that writes a
-- sale's ledger row adds it here too (stock.Store's two ledger writers), so
-- reading a product's sold units is one row however long its round, and
-- always the ledger's figure: both commit or neither. Whatever else writes
-- sales rows must add them here as well (the load tester's --seed-ledger
-- does).
--
-- Sales wait while this migrates, so that none is missed between the sum
-- below and the first sale that adds itself. A replica older than this
-- migration still sells without adding here: in a rolling upgrade, the
-- rounds it sells in read short until restocked; stop old replicas first.
LOCK TABLE sales IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE round_totals (
    product_id text   NOT NULL,
    round      int    NOT NULL,
    units      bigint NOT NULL,
    sales      bigint NOT NULL,
    PRIMARY KEY (product_id, round)
);
INSERT INTO round_totals (product_id, round, units, sales)
SELECT product_id, round, sum(quantity), count(*) FROM sales GROUP BY product_id, round;

-- +goose Down
DROP TABLE round_totals;
