// Package client is the one Go client of the inventory service's HTTP API:
// a typed call for each operation of its OpenAPI description
// (internal/api/openapi.yaml), every error answer as a *Problem, and Retry
// for a buyer who sends a sale again with the same Idempotency-Key. Its
// bodies and answers are package wire's, the types the service writes.
//
// A Client is safe for concurrent use. Its sales are cheap enough for a
// load tester's tens of thousands a second: the usual answers are read
// without reflection, in one allocation. The browser's pages (GET /, the
// docs) have no call here.
package client
