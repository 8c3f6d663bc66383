package stock

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// commitCutter is a TCP proxy between Postgres clients and a Postgres
// server that can lose the reply to one COMMIT (commit-reply-lost): armed,
// it forwards the next COMMIT a client sends, waits for the server's answer
// (by then the server has committed), drops it and closes that client's
// connection; or, armed to stall, drops it and everything after it on that
// connection, leaving the client waiting until it gives up; or, armed
// unsent, drops the COMMIT itself and closes the connection, so nothing is
// committed though the client sees what it sees for a lost reply. Everything else
// passes through untouched, so the client's follow-up queries on other
// connections work.
//
// It reads the client's side of the protocol message by message: the
// untyped startup packet (and an SSL or GSS encryption request before it,
// answered by the server with one byte), then typed messages, among them the
// simple-protocol Query that pgx's Tx.Commit sends: 'Q', int32 length,
// "commit\x00"; and the one-statement sale (CALL sell(…) outside a
// transaction block), whose commit point is the Sync after its Bind (see
// sellCalls).
type commitCutter struct {
	ln       net.Listener
	upstream string
	// armed is the cut the next COMMIT gets: cutNone, cutClose or cutStall.
	armed atomic.Int32
	cuts  atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newCommitCutter starts a proxy to upstream (host:port) on a free loopback
// port; it is closed when the test ends.
func newCommitCutter(t *testing.T, upstream string) *commitCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for the commit-cutting proxy: %v", err)
	}
	p := &commitCutter{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *commitCutter) Addr() string { return p.ln.Addr().String() }

// What happens to a COMMIT's reply.
const (
	cutNone   = iota // forwarded
	cutClose         // dropped, and the client's connection closed
	cutStall         // dropped, with everything after it; the connection stays open
	cutUnsent        // the COMMIT itself dropped, and the client's connection closed
)

// Arm makes the proxy lose the reply to the next COMMIT any client sends,
// and only that one, closing that client's connection.
func (p *commitCutter) Arm() { p.armed.Store(cutClose) }

// ArmStall makes the proxy lose the reply to the next COMMIT any client
// sends, and only that one, keeping the connection open and silent.
func (p *commitCutter) ArmStall() { p.armed.Store(cutStall) }

// ArmUnsent makes the proxy drop the next COMMIT any client sends before it
// reaches the server, and close that client's connection: the client cannot
// tell this from a lost reply, but nothing was committed.
func (p *commitCutter) ArmUnsent() { p.armed.Store(cutUnsent) }

// Disarm forgets a cut that has not happened.
func (p *commitCutter) Disarm() { p.armed.Store(cutNone) }

// Armed reports whether the proxy is still waiting for a COMMIT to cut.
func (p *commitCutter) Armed() bool { return p.armed.Load() != cutNone }

// Cuts is how many COMMITs or COMMIT replies the proxy has dropped.
func (p *commitCutter) Cuts() int64 { return p.cuts.Load() }

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *commitCutter) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

// track remembers c for Close; false when the proxy is closing (c is then closed).
func (p *commitCutter) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *commitCutter) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *commitCutter) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve relays one client connection.
func (p *commitCutter) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		p.forget(client)
		return
	}
	if !p.track(server) {
		p.forget(client)
		return
	}
	defer p.forget(client, server)
	// cut is set, before the COMMIT goes to the server, on the connection
	// whose COMMIT reply is to be lost. The client sends COMMIT only once it
	// has read every earlier reply, so whatever the server sends after it is
	// the COMMIT's answer.
	var cut atomic.Int32
	p.wg.Go(func() {
		defer p.forget(client, server)
		buf := make([]byte, 32<<10)
		counted := false
		for {
			n, err := server.Read(buf)
			if c := cut.Load(); n > 0 && c != cutNone {
				// The server has answered the COMMIT, so it has decided it.
				// The client never hears the answer.
				if !counted {
					counted = true
					p.cuts.Add(1)
				}
				if c == cutClose {
					return
				}
				n = 0
			}
			if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	r := bufio.NewReader(client)
	if !p.relayStartup(r, server) {
		return
	}
	var calls sellCalls
	for {
		msg, err := readMessage(r)
		if err != nil {
			return
		}
		if isCommit(msg) || calls.commits(msg) {
			c := p.armed.Swap(cutNone)
			if c == cutUnsent {
				p.cuts.Add(1)
				return
			}
			if c != cutNone {
				cut.Store(c)
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// relayStartup forwards the client's untyped startup packet, after any
// number of SSL/GSS encryption requests (each refused or accepted by the
// server with one byte, which the other direction relays).
func (p *commitCutter) relayStartup(r *bufio.Reader, server net.Conn) bool {
	const sslRequest, gssRequest = 80877103, 80877104
	for {
		var head [8]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return false
		}
		n := binary.BigEndian.Uint32(head[:4])
		if n < 8 || n > 1<<20 {
			return false
		}
		packet := make([]byte, n)
		copy(packet, head[:])
		if _, err := io.ReadFull(r, packet[8:]); err != nil {
			return false
		}
		if _, err := server.Write(packet); err != nil {
			return false
		}
		if code := binary.BigEndian.Uint32(head[4:8]); n != 8 || (code != sslRequest && code != gssRequest) {
			return true
		}
	}
}

// readMessage reads one typed frontend message: type byte, int32 length
// (counting itself), body.
func readMessage(r *bufio.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<28 {
		return nil, fmt.Errorf("frontend message %q with length %d", head[0], n)
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// isCommit reports whether msg is a simple-protocol Query of just COMMIT.
func isCommit(msg []byte) bool {
	if len(msg) < 6 || msg[0] != 'Q' {
		return false
	}
	q := bytes.TrimSpace(bytes.TrimRight(msg[5:], "\x00"))
	q = bytes.TrimSpace(bytes.TrimSuffix(q, []byte(";")))
	return bytes.EqualFold(q, []byte("commit")) || bytes.EqualFold(q, []byte("end"))
}

// sellCalls follows one connection's extended-protocol messages to find
// the commit point of a one-statement sale: CALL sell(…) runs outside a
// transaction block, in the implicit transaction that the Sync after its
// Bind and Execute commits. Dropping that Sync (and closing) leaves the
// sale uncommitted; forwarding it commits the sale, and what the server
// sends afterwards is its answer.
type sellCalls struct {
	prepared map[string]bool // statement names whose query is CALL sell(
	pending  bool            // a sale's Bind was seen, its Sync not yet
}

// commits reports whether msg is the Sync that commits a sale.
func (c *sellCalls) commits(msg []byte) bool {
	switch msg[0] {
	case 'P': // Parse: name, query
		fields := bytes.SplitN(msg[5:], []byte{0}, 3)
		if len(fields) == 3 && bytes.HasPrefix(bytes.TrimSpace(fields[1]), []byte("CALL sell(")) {
			if c.prepared == nil {
				c.prepared = map[string]bool{}
			}
			c.prepared[string(fields[0])] = true
		}
	case 'B': // Bind: portal, statement
		fields := bytes.SplitN(msg[5:], []byte{0}, 3)
		c.pending = len(fields) == 3 && c.prepared[string(fields[1])]
	case 'S': // Sync
		committing := c.pending
		c.pending = false
		return committing
	}
	return false
}
