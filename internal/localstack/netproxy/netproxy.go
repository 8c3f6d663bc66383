// Package netproxy puts a TCP proxy (toxiproxy, in this process) between
// clients and one server, for the network faults: latency, a cut link, a
// lost COMMIT reply, a redirect. It is a package of its own, apart from
// internal/localstack, so that what links localstack (the lock backends'
// throw-away servers, which the service's Descriptors name) does not link
// toxiproxy.
package netproxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy in this process (toxiproxy) between clients and
// one server, for the network faults: latency added to the link, or the
// link cut (data dropped both ways) and restored.
type Proxy struct {
	// Addr is the proxy's host:port on 127.0.0.1: what clients dial
	// instead of the server's.
	Addr string

	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	n     int // toxics added, for unique names
}

// toxiproxyServer is the one toxiproxy "API server" every Proxy hangs
// off: a registry of metrics and a logger, no HTTP listener.
var toxiproxyServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
})

// Start listens on a free loopback port and forwards every
// connection to upstream (host:port).
func Start(name, upstream string) (*Proxy, error) {
	p := toxiproxy.NewProxy(toxiproxyServer(), name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start proxy %s to %s: %w", name, upstream, err)
	}
	return &Proxy{Addr: p.Listen, proxy: p}, nil
}

// AddLatency delays the data of every connection, both ways, by latency
// ± jitter, until Heal.
func (p *Proxy) AddLatency(latency, jitter time.Duration) error {
	attrs := fmt.Sprintf(`{"latency":%d,"jitter":%d}`, latency.Milliseconds(), jitter.Milliseconds())
	return p.addBothWays("latency", attrs)
}

// Cut drops every byte both ways, on open connections and new ones alike,
// as a network partition would: nothing is closed, clients see silence
// until their own timeouts. Heal restores the link and closes the
// connections that were cut.
func (p *Proxy) Cut() error { return p.addBothWays("timeout", `{"timeout":0}`) }

func (p *Proxy) addBothWays(kind, attrs string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stream := range []string{"upstream", "downstream"} {
		p.n++
		spec := fmt.Sprintf(`{"name":"%s-%s-%d","type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, kind, stream, p.n, kind, stream, attrs)
		if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
			return fmt.Errorf("proxy %s: add %s toxic: %w", p.proxy.Name, kind, err)
		}
	}
	return nil
}

// Heal removes every toxic: the link is whole again. Connections that were
// cut are closed, so their clients reconnect.
func (p *Proxy) Heal(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proxy.Toxics.ResetToxics(ctx)
}

// Stop closes the listener and every connection.
func (p *Proxy) Stop() { p.proxy.Stop() }

// Redirect points the link at another server (host:port), as a virtual
// address moving to a promoted replica would: open connections are
// closed, new ones reach the new server. Toxics stay.
func (p *Proxy) Redirect(upstream string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.proxy.Update(&toxiproxy.Proxy{Name: p.proxy.Name, Listen: p.Addr, Upstream: upstream, Enabled: true})
	if err != nil {
		return fmt.Errorf("proxy %s: redirect to %s: %w", p.proxy.Name, upstream, err)
	}
	return nil
}
