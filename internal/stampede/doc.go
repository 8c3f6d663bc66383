// Package stampede measures what a crowd of anonymous readers of one
// product costs Postgres through a fleet's front door (nginx, the
// replicas, the product cache they share): Postgres reads per second while
// the crowd reads in a loop, and the Postgres reads one expiry of the
// cached entry costs when the whole crowd arrives just after it. The
// figures come from the replicas' own counter,
// inventory_product_reads_total{source="postgres"}, so they count what
// the service did, not what the readers guess. It only reads; the caller
// starts the fleet in the cache mode it measures.
package stampede
