// Package nginx holds the nginx configuration that docker compose mounts and
// the local fleet runs, and derives the local fleet's copy from it.
//
// The files in this directory are the single source: compose mounts
// nginx.conf and upstreams.conf as they are, and LocalFiles changes only the
// listen address and the upstream addresses, so what the tests run is what
// compose users run.
package nginx

import (
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Conf is nginx.conf as compose mounts it at /etc/nginx/nginx.conf.
//
//go:embed nginx.conf
var Conf string

// Upstreams is upstreams.conf as compose mounts it at /etc/nginx/upstreams.conf:
// one "server HOST:PORT params;" line per replica.
//
//go:embed upstreams.conf
var Upstreams string

// ComposeListen is the one listen directive in Conf (a line of its own);
// LocalFiles replaces it.
const ComposeListen = "listen 8080;"

var listenLine = regexp.MustCompile(`(?m)^([ \t]*)` + regexp.QuoteMeta(ComposeListen) + `[ \t]*$`)

// ErrConfig reports that the files in this directory no longer have the
// shape LocalFiles relies on.
var ErrConfig = errors.New("nginx config")

var serverLine = regexp.MustCompile(`(?m)^\s*server\s+(\S+)(\s+[^;]*)?;`)

// UpstreamServer is one "server" line of upstreams.conf.
type UpstreamServer struct {
	// Addr is the host:port the line names, e.g. "inventory-1:8080".
	Addr string
	// Params is the rest of the line before ";", e.g. " max_fails=3 fail_timeout=5s".
	Params string
}

// UpstreamServers parses the server lines of an upstreams.conf.
func UpstreamServers(upstreams string) []UpstreamServer {
	var out []UpstreamServer
	for _, m := range serverLine.FindAllStringSubmatch(upstreams, -1) {
		out = append(out, UpstreamServer{Addr: m[1], Params: m[2]})
	}
	return out
}

// LocalFiles returns the nginx.conf and upstreams.conf for a local fleet:
// Conf with its listen directive moved to listen (host:port), and one server
// line per address in replicas carrying the same parameters as compose's
// first server line. The result is what localstack.StartNginx takes.
func LocalFiles(listen string, replicas []string) (map[string]string, error) {
	if n := len(listenLine.FindAllStringIndex(Conf, -1)); n != 1 {
		return nil, fmt.Errorf("%w: nginx.conf has %d %q lines, want exactly 1", ErrConfig, n, ComposeListen)
	}
	if !strings.Contains(Conf, "include upstreams.conf;") {
		return nil, fmt.Errorf("%w: nginx.conf does not include upstreams.conf", ErrConfig)
	}
	servers := UpstreamServers(Upstreams)
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: upstreams.conf has no server line", ErrConfig)
	}
	if len(replicas) == 0 {
		return nil, fmt.Errorf("%w: no replica addresses", ErrConfig)
	}
	var up strings.Builder
	up.WriteString("# Written by the local fleet from nginx/upstreams.conf: same parameters, local addresses.\n")
	for _, addr := range replicas {
		fmt.Fprintf(&up, "server %s%s;\n", addr, servers[0].Params)
	}
	return map[string]string{
		"nginx.conf":     listenLine.ReplaceAllString(Conf, "${1}listen "+listen+";"),
		"upstreams.conf": up.String(),
	}, nil
}

// Limits are the gateway limits of nginx.conf; a zero field turns its
// limit off.
type Limits struct {
	// ClientRate is the requests per second one client address may send,
	// on any path, with ClientBurst more let through at once; beyond, 429.
	ClientRate, ClientBurst int
	// ProductSales is how many sales of one product may be in flight on the
	// routed path POST /products/{id}/sale; beyond, 429.
	ProductSales int
}

// DefaultLimits are the limits nginx.conf ships with, on: what compose runs
// and the local fleet starts with. docs/operations.md says how they were
// sized to a 2-core box.
var DefaultLimits = Limits{ClientRate: 20000, ClientBurst: 2000, ProductSales: 64}

// The lines of nginx.conf that WithLimits rewrites, each exactly once, as
// shipped (with DefaultLimits).
const (
	clientKeyOn    = `default $binary_remote_addr;  # off: ""`
	productKeyOn   = `default $inventory_product;  # off: ""`
	clientRate     = "zone=inventory_per_client:10m rate=20000r/s;"
	clientBurst    = "limit_req zone=inventory_per_client burst=2000 nodelay;"
	productSales   = "limit_conn inventory_per_product 64;"
	keyOff         = `default "";`
	limitsFileName = "nginx.conf" // the file of files they are in
)

// WithLimits sets, in files' nginx.conf (from LocalFiles), the limits l:
// each non-zero field's number, and each zero field's limit off (the
// zero Limits turns every limit off).
func WithLimits(files map[string]string, l Limits) (map[string]string, error) {
	conf := files[limitsFileName]
	for _, line := range []string{clientKeyOn, productKeyOn, clientRate, clientBurst, productSales} {
		if n := strings.Count(conf, line); n != 1 {
			return nil, fmt.Errorf("%w: nginx.conf has %d %q, want exactly 1", ErrConfig, n, line)
		}
	}
	if l.ClientRate < 0 || l.ClientBurst < 0 || l.ProductSales < 0 {
		return nil, fmt.Errorf("%w: negative gateway limits %+v", ErrConfig, l)
	}
	if l.ClientRate > 0 {
		conf = strings.Replace(conf, clientRate, fmt.Sprintf("zone=inventory_per_client:10m rate=%dr/s;", l.ClientRate), 1)
		conf = strings.Replace(conf, clientBurst, fmt.Sprintf("limit_req zone=inventory_per_client burst=%d nodelay;", l.ClientBurst), 1)
	} else {
		conf = strings.Replace(conf, clientKeyOn, keyOff, 1)
	}
	if l.ProductSales > 0 {
		conf = strings.Replace(conf, productSales, fmt.Sprintf("limit_conn inventory_per_product %d;", l.ProductSales), 1)
	} else {
		conf = strings.Replace(conf, productKeyOn, keyOff, 1)
	}
	out := make(map[string]string, len(files))
	for k, v := range files {
		out[k] = v
	}
	out[limitsFileName] = conf
	return out, nil
}
