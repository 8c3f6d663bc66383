// Package inventory is the domain: an order, a sale, a product and its
// rounds, a restock, the errors a sale can end with, and the strategies by
// name with what each one is. It imports nothing of this module: the
// store (internal/postgres), the strategies (internal/stock), the HTTP API
// and the harness all speak its words.
package inventory
