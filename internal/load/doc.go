// Package load fires buyers at an inventory fleet through its HTTP API
// (internal/client) and tallies what they were told: Run restocks a
// scenario's products, sends its buyers in waves at a given concurrency
// (naming a strategy, or none while the fleet default is switched),
// retries with the same Idempotency-Key where asked, restocks mid-run when
// asked, then reads every round it sold in back and has internal/verdict
// judge each product. MeasureCeilings and its neighbours measure what the
// strategies are compared against. The package sells nothing itself.
package load
