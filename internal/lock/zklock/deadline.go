package zklock

import (
	"net"
	"time"
)

// go-zookeeper gives a server 10 × 2/3 of the session timeout to answer a
// session handshake (133 s for a 20 s TTL) before it gives the connection
// up and tries again. A ZooKeeper that accepted a connection while
// starting and then never read it (seen after a restart, in
// TestServerRestart: 133 s of make test spent waiting) held the Locker
// that long without a session, so without locks. No deadline the client
// sets lies further ahead than the session timeout (at least
// minDeadlineLimit): a handshake not answered by then has outlived the
// session it asks to keep, and is better tried again. The client's other
// deadlines, 2/3 of the session timeout, are not changed.

// minDeadlineLimit keeps the cap from cutting the handshakes of the
// sub-second TTLs tests use.
const minDeadlineLimit = 2 * time.Second

// cappedDialer wraps dial so that no deadline set on its connections lies
// further ahead than limit.
func cappedDialer(dial func(network, address string, timeout time.Duration) (net.Conn, error), limit time.Duration) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return cappedConn{Conn: c, limit: limit}, nil
	}
}

// cappedConn is a connection whose deadlines are at most limit from when
// they are set; no deadline (the zero time) stays none.
type cappedConn struct {
	net.Conn
	limit time.Duration
}

func (c cappedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.cap(t)) }
func (c cappedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.cap(t)) }
func (c cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }

func (c cappedConn) cap(t time.Time) time.Time {
	if limit := time.Now().Add(c.limit); !t.IsZero() && t.After(limit) {
		return limit
	}
	return t
}

// deadlineLimit is the cap for a session timeout of ttl.
func deadlineLimit(ttl time.Duration) time.Duration { return max(ttl, minDeadlineLimit) }
