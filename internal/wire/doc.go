// Package wire is the inventory service's HTTP contract in Go: the JSON
// bodies of its requests and answers, as components.schemas of its OpenAPI
// description (internal/api/openapi.yaml) names them, shared by the
// service (internal/api) and its client (internal/client), and checked
// against that description by this package's tests.
//
// Integers are int64 whatever their range, so that one side cannot read
// into a narrower type than the other writes. The bodies a crowd of buyers
// sends and gets by the thousand (a sale, a sold-out problem, a health
// answer) have writers and readers here that need no reflection
// (AppendJSON, ScanSaleRequest, ScanSale, ScanProblem, ScanHealth); each
// reads and writes what encoding/json would, or gives up and lets
// encoding/json do it, and the fuzz targets hold them to that.
//
// wire imports only the standard library.
package wire
