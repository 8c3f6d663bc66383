package redis

// The keys of a product in Redis. The hash tag {id} keeps every key of one
// product in one Redis Cluster slot, as a script touching several needs.

// LockKey is the name of a product's lock, in every lock backend.
func LockKey(productID string) string { return "lock:{" + productID + "}" }

// CounterKey is the lua strategy's counter of a product's units.
func CounterKey(productID string) string { return "stock:{" + productID + "}" }

// SetNXKey is the naive setnx strategy's lock key of a product.
func SetNXKey(productID string) string { return "setnx:{" + productID + "}" }

// LeasesKey is the sorted set of a product's reservations in flight (see
// reserve.lua).
func LeasesKey(productID string) string { return CounterKey(productID) + ":leases" }

// ReservationKey is where a sale's reservation res is remembered.
func ReservationKey(productID, res string) string { return CounterKey(productID) + ":res:" + res }

// OrderLockKey is the name of an order's lock (the steps of its life), in
// every lock backend. A product id has no ':', so it never collides with a
// product's LockKey.
func OrderLockKey(orderID string) string { return "lock:order:{" + orderID + "}" }

// JobLockKey is the name of a periodic job's lock (its runner), in every
// lock backend.
func JobLockKey(job string) string { return "lock:job:{" + job + "}" }
