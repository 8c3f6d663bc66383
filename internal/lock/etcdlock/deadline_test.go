package etcdlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"inventory/internal/localstack/netproxy"
	"inventory/internal/lock"
	"inventory/internal/testenv"
)

// keepAliveClock records, from inside the etcd client (a gRPC stream
// interceptor), when each lease keepalive was sent, and so when the last
// one that etcd answered was sent. etcd's leader extends a lease to the
// moment it handles the keepalive plus the TTL, which is no earlier than
// that send time plus the TTL.
type keepAliveClock struct {
	mu       sync.Mutex
	answered time.Time // send time of the last answered keepalive
	count    int       // answered keepalives
}

func (k *keepAliveClock) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
		return s, err
	}
	return &keepAliveStream{ClientStream: s, k: k}, nil
}

// keepAliveStream pairs a keepalive stream's answers with its requests:
// etcd answers them in order.
type keepAliveStream struct {
	grpc.ClientStream
	k     *keepAliveClock
	mu    sync.Mutex
	sends []time.Time
	recvs int
}

func (s *keepAliveStream) SendMsg(m any) error {
	s.mu.Lock()
	s.sends = append(s.sends, time.Now())
	s.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

func (s *keepAliveStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	sent := s.sends[s.recvs]
	s.recvs++
	s.mu.Unlock()
	s.k.mu.Lock()
	if sent.After(s.k.answered) {
		s.k.answered = sent
	}
	s.k.count++
	s.k.mu.Unlock()
	return nil
}

func (k *keepAliveClock) last() (time.Time, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.answered, k.count
}

// TestLeaseEndsBeforeEtcdCanEndIt: cut off from etcd, a holder must give
// its lease up before etcd could have ended it, so that no other holder is
// let in while it still trusts its own. etcd ends the lease no earlier
// than the TTL after its last keepalive was sent; the holder's lease must
// be lost before then (its deadline is counted from the send, less a drift
// allowance), not from the answer's arrival plus the whole TTL.
func TestLeaseEndsBeforeEtcdCanEndIt(t *testing.T) {
	eps := testenv.EtcdEndpoints(t)
	proxy, err := netproxy.Start("etcd-"+t.Name(), eps[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	clock := &keepAliveClock{}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{proxy.Addr},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(clock.intercept)},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// 10s: its drift allowance (102ms) is the margin the loss must land in,
	// ample for a timer firing late on a busy machine.
	const ttl = 10 * time.Second
	l := New(c, Options{Options: lock.Options{TTL: ttl}, Prefix: prefix(t)})
	t.Cleanup(func() { _ = l.Close() })
	ctx := context.Background()
	held, err := l.Lock(ctx, "d")
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	_, before := clock.last()
	testenv.WaitFor(t, "a keepalive answered after the grant", 2*ttl, func() bool { _, n := clock.last(); return n > before })
	if err := proxy.Cut(); err != nil {
		t.Fatal(err)
	}
	lostAt := make(chan time.Time, 1)
	context.AfterFunc(held.Context(), func() { lostAt <- time.Now() })
	var at time.Time
	select {
	case at = <-lostAt:
	case <-time.After(3 * ttl):
		t.Fatalf("lease not lost %v after the link to etcd was cut (TTL %v)", 3*ttl, ttl)
	}
	sent, _ := clock.last()
	etcdEnds := sent.Add(ttl)
	// The lease's own deadline, not the moment this test heard of the loss:
	// on a loaded machine the callback runs late (by 106 ms once, under a
	// load average of 23), and Err counts the deadline passed before any
	// timer fires.
	deadline := held.(*Lease).Deadline()
	if !deadline.Before(etcdEnds) {
		t.Errorf("lease's deadline %v after the last answered keepalive was sent, want before the TTL (%v): etcd may have ended it %v earlier",
			deadline.Sub(sent), ttl, deadline.Sub(etcdEnds))
	} else {
		t.Logf("lease's deadline %v, its loss heard %v after the last answered keepalive was sent (TTL %v)", deadline.Sub(sent), at.Sub(sent), ttl)
	}
	if err := held.Err(); !errors.Is(err, lock.ErrLost) || !errors.Is(err, ErrSessionEnded) {
		t.Errorf("Err() = %v, want lock.ErrLost and ErrSessionEnded", err)
	}
	proxy.Heal(ctx)
	_ = held.Release(ctx)
}
