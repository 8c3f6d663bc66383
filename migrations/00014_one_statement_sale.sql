-- +goose Up
-- A sale's whole write in one statement, so that a sale costs Postgres one
-- round trip (issue 38): record_sales is the one writer of the ledger (a
-- single sale's row, a batch's rows, a group of products' rows), and sell
-- is one sale, called on its own (CALL, outside any transaction block):
-- the check, the fence, the guarded decrement and the ledger commit
-- together or not at all.

-- record_sales writes the ledger rows of one transaction: row i sells
-- quantities[i] of products[i] in rounds[i], leaving remainders[i] in stock,
-- under Idempotency-Key keys[i] (NULL: none) and sale_keys[i] (unique to the
-- sale, to find it after a lost COMMIT reply), a hold with pay_ms[i] ms to
-- pay when above 0 (an orders row 'held' with its deadline, and its first
-- event). Each row's product and round get its units in round_totals. A row
-- whose Idempotency-Key a committed sale has is skipped (Postgres first
-- waits for a transaction still holding the key to end): the answer holds
-- only the rows written. Rows go in key order and totals in product order,
-- so two writers with keys or products in common wait for each other in
-- one order and cannot deadlock. The caller has taken every product's
-- stock row lock first (stock before round_totals, always).
-- +goose StatementBegin
CREATE FUNCTION record_sales(
    products text[], rounds int[], quantities bigint[], keys text[], sale_keys text[],
    remainders bigint[], pay_ms bigint[], by_strategy text, by_instance text, by_fence bigint)
RETURNS TABLE (sale_key text, sale_id bigint, created_at timestamptz, order_id text, expires_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- plpgsql, not sql: Postgres plans a plpgsql function's statement once
    -- per session and keeps the plan; a sql function's body is planned
    -- again at every call (a sale's, a batch's).
    RETURN QUERY
    WITH ins AS (
        INSERT INTO sales (product_id, round, quantity, strategy, instance, idempotency_key, sale_key, fence, remaining)
        SELECT t.p, t.r, t.q, by_strategy, by_instance, t.k, t.sk, nullif(by_fence, 0), t.rem
        FROM unnest(products, rounds, quantities, keys, sale_keys, remainders) WITH ORDINALITY AS t(p, r, q, k, sk, rem, n)
        ORDER BY t.k NULLS LAST, t.n
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING sales.id, sales.sale_key, sales.product_id, sales.round, sales.quantity, sales.created_at
    ), tot AS (
        INSERT INTO round_totals AS t (product_id, round, units, sales)
        SELECT ins.product_id, ins.round, sum(ins.quantity), count(*) FROM ins
        GROUP BY ins.product_id, ins.round ORDER BY ins.product_id, ins.round
        ON CONFLICT (product_id, round) DO UPDATE SET units = t.units + EXCLUDED.units, sales = t.sales + EXCLUDED.sales
    ), held AS (
        INSERT INTO orders (id, sale_id, product_id, round, quantity, state, expires_at, created_at, updated_at)
        SELECT gen_random_uuid(), ins.id, ins.product_id, ins.round, ins.quantity, 'held',
               ins.created_at + p.ms * interval '1 millisecond', ins.created_at, ins.created_at
        FROM ins JOIN unnest(sale_keys, pay_ms) AS p(sk, ms) ON p.sk = ins.sale_key
        WHERE p.ms > 0
        RETURNING orders.id, orders.sale_id, orders.expires_at, orders.created_at
    ), entered AS (
        INSERT INTO order_events (order_id, state, at, by) SELECT held.id, 'held', held.created_at, by_instance FROM held
    )
    SELECT ins.sale_key, ins.id, ins.created_at, coalesce(held.id::text, ''), coalesce(held.expires_at, ins.created_at)
    FROM ins LEFT JOIN held ON held.sale_id = ins.id;
END
$$;
-- +goose StatementEnd

-- sell is one sale of want units of product p, by strategy s on instance i,
-- and its outcome, in one statement: CALL it outside a transaction block
-- and it commits on its own (Postgres's implicit transaction), so a sale is
-- one round trip. lock_ms bounds each wait for a row lock (lock_timeout).
--
-- With fence_backend NULL it is the guarded write: one conditional
-- UPDATE … WHERE quantity >= want (in round in_round, when not 0). With a
-- fence_backend it is a lock holder's sale: it locks the stock row, checks
-- that want units are left, raises the product's fence of counter
-- fence_backend to fence_token only if the fence is below it (a holder with
-- the same or a newer token claimed the row: the lock broke), and then
-- decrements, still guarded. Either way it then writes the ledger row
-- (record_sales); when its Idempotency-Key was taken meanwhile it raises
-- unique_violation on sales_idempotency_key_key, so that nothing it did
-- commits.
--
-- outcome: 'sold' (sale_id, sold_at, remaining, sold_round, order_id,
-- expires_at are the sale's), 'sold_out' (remaining: what is left),
-- 'round_changed' (the product moved on from in_round; sold_round: its
-- round now), 'not_found', or 'fence_refused' (newest_fence: the token
-- that claimed the row last).
-- +goose StatementBegin
CREATE PROCEDURE sell(
    p text, want bigint, in_round int, idem_key text, sale_key_in text, pay_ms_in bigint,
    s text, i text, fence_backend text, fence_token bigint, lock_ms int,
    OUT outcome text, OUT sale_id bigint, OUT sold_at timestamptz, OUT remaining bigint, OUT sold_round int,
    OUT order_id text, OUT expires_at timestamptz, OUT newest_fence bigint)
LANGUAGE plpgsql AS $$
DECLARE
    left_now bigint;
    round_now int;
BEGIN
    PERFORM set_config('lock_timeout', lock_ms::text, true);
    IF fence_backend IS NULL THEN
        UPDATE stock SET quantity = quantity - want, version = version + 1, updated_at = now()
        WHERE product_id = p AND quantity >= want AND (in_round = 0 OR round = in_round)
        RETURNING quantity, round INTO left_now, round_now;
        IF NOT FOUND THEN
            SELECT quantity, round INTO left_now, round_now FROM stock WHERE product_id = p;
            IF NOT FOUND THEN
                outcome := 'not_found';
            ELSIF in_round <> 0 AND round_now <> in_round THEN
                outcome := 'round_changed';
            ELSE
                outcome := 'sold_out';
            END IF;
            remaining := left_now;
            sold_round := round_now;
            RETURN;
        END IF;
    ELSE
        SELECT quantity, round INTO left_now, round_now FROM stock WHERE product_id = p FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            outcome := 'not_found';
            RETURN;
        END IF;
        IF left_now < want THEN
            outcome := 'sold_out';
            remaining := left_now;
            sold_round := round_now;
            RETURN;
        END IF;
        INSERT INTO fences (product_id, backend, token) VALUES (p, fence_backend, fence_token)
        ON CONFLICT (product_id, backend) DO UPDATE SET token = EXCLUDED.token WHERE fences.token < EXCLUDED.token;
        IF NOT FOUND THEN
            SELECT f.token INTO newest_fence FROM fences f WHERE f.product_id = p AND f.backend = fence_backend;
            outcome := 'fence_refused';
            RETURN;
        END IF;
        UPDATE stock SET quantity = quantity - want, version = version + 1, updated_at = now()
        WHERE product_id = p AND quantity >= want
        RETURNING quantity INTO left_now;
        IF NOT FOUND THEN
            -- Under the row lock taken above the stock cannot have changed:
            -- SQLSTATE IG001 (inventory guard), a breach.
            RAISE EXCEPTION 'the guard refused % of % under the row lock', want, p USING ERRCODE = 'IG001';
        END IF;
    END IF;
    SELECT r.sale_id, r.created_at, r.order_id, r.expires_at INTO sale_id, sold_at, order_id, expires_at
    FROM record_sales(ARRAY[p], ARRAY[round_now], ARRAY[want], ARRAY[idem_key], ARRAY[sale_key_in],
                      ARRAY[left_now], ARRAY[pay_ms_in], s, i, coalesce(fence_token, 0)) r;
    IF NOT FOUND THEN
        RAISE unique_violation USING CONSTRAINT = 'sales_idempotency_key_key',
            MESSAGE = format('idempotency key %s: another sale committed it meanwhile', idem_key);
    END IF;
    outcome := 'sold';
    remaining := left_now;
    sold_round := round_now;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP PROCEDURE sell;
DROP FUNCTION record_sales;
