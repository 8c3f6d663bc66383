package redislock

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriberIdle is how long a release channel stays subscribed with no
// waiter on it, and the subscriber runs with no channel, before they are
// dropped: long enough that steady contention does not re-subscribe (or
// re-dial) per acquisition, short enough that an idle process holds no
// connection for long.
const subscriberIdle = 2 * time.Second

// notifier wakes a Mutex's or Reentrant's waiters when the lock they wait for
// is released. It holds one Redis pub/sub connection, opened when a waiter
// first needs it and closed after subscriberIdle without waiters; each lock
// key with local waiters has its channel subscribed on it (releaseChannel).
// A release notice wakes one local waiter, the first parked; the others stay
// parked. A woken waiter that leaves without a try's answer passes the
// notice on to the next parked one (leave). A notice that is lost (the connection dropped, a key that expired
// or was deleted without a release) is covered by the waiters' own timed
// retries (Options.PollInterval, and the holder's remaining TTL).
type notifier struct {
	rdb    redis.UniversalClient
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the subscriber and sender goroutines

	mu     sync.Mutex
	closed bool
	ps     *redis.PubSub // the running subscriber's, nil when none runs
	chans  map[string]*channel
	// ops are the subscription changes decided under mu, which the sender
	// goroutine (sending: one runs) sends in that order, outside mu: a
	// SUBSCRIBE on a new connection can take a dial and a handshake, and
	// must not hold up the waiters and notices of every other key.
	ops     []psOp
	sending bool
}

// psOp is one change to a subscriber's subscriptions: SUBSCRIBE chans,
// UNSUBSCRIBE chans (unsub), or closing it (close).
type psOp struct {
	ps           *redis.PubSub
	chans        []string
	unsub, close bool
}

// channel is one release channel's local waiters. Guarded by notifier.mu.
type channel struct {
	waiting   int                // waiters that joined and have not left: parked or trying
	parked    []*waiter          // waiting for a notice, woken front first
	addressed map[string]*waiter // the Fair lock's waiters by token (joinAddressed); nil otherwise
	pending   bool               // a notice came while none was parked: the next to park tries at once
	ready     chan struct{}      // closed when Redis confirms the subscription
	confirmed bool
	idleSince time.Time // when waiting last dropped to 0
}

// waiter is one Lock call waiting for one key.
type waiter struct {
	n      *notifier
	c      *channel
	ready  <-chan struct{} // c.ready until it fired for this waiter; nil after
	wake   chan struct{}   // a notice handed over by wakeOne; capacity 1
	parked bool            // in c.parked; guarded by notifier.mu
	// token addresses the waiter (joinAddressed): a notice whose payload
	// is its token wakes it and no other. "" for Mutex and Reentrant.
	token   string
	noticed bool // an addressed notice came while it was not parked; guarded by notifier.mu
	// notice: the waiter was woken by a notice (or took a pending one)
	// that no try of its own has used yet. If it leaves so, the notice
	// goes on to the next parked waiter (leave): the release it announced
	// may have freed the lock for them. Only the waiter's goroutine uses it.
	notice bool
}

func newNotifier(rdb redis.UniversalClient) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{rdb: rdb, ctx: ctx, cancel: cancel, chans: map[string]*channel{}}
}

// join registers a waiter on name, subscribing to it (and starting the
// subscriber) if no local waiter was on it. It returns nil after close:
// the caller then polls.
func (n *notifier) join(name string) *waiter {
	return n.joinAddressed(name, "")
}

// joinAddressed is join for a waiter that only notices carrying token as
// their payload wake (the Fair lock's, whose releases name the next in
// line). A notice with an empty payload wakes one waiter as in join.
func (n *notifier) joinAddressed(name, token string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	c := n.chans[name]
	if c == nil {
		start := n.ps == nil
		if start {
			n.ps = n.rdb.Subscribe(n.ctx) // no channel yet: no command sent
		}
		// Sent by the sender, after every change decided before, so that
		// SUBSCRIBE and reap's UNSUBSCRIBE reach Redis in the order they
		// were decided. Until Redis confirms it this waiter polls; an error
		// (Redis unreachable) leaves the channel recorded: go-redis
		// subscribes it when the subscriber reconnects.
		n.send(psOp{ps: n.ps, chans: []string{name}})
		c = &channel{ready: make(chan struct{})}
		n.chans[name] = c
		if start {
			n.wg.Add(1)
			go n.receive(n.ps)
		}
	}
	c.waiting++
	w := &waiter{n: n, c: c, wake: make(chan struct{}, 1), token: token}
	if token != "" {
		if c.addressed == nil {
			c.addressed = map[string]*waiter{}
		}
		c.addressed[token] = w
	}
	if !c.confirmed {
		w.ready = c.ready
	}
	return w
}

// send queues op for the sender goroutine, starting one if none runs.
// Called with n.mu held.
func (n *notifier) send(op psOp) {
	n.ops = append(n.ops, op)
	if !n.sending {
		n.sending = true
		n.wg.Add(1)
		go n.sendOps()
	}
}

// sendOps sends the queued subscription changes in order until none is
// left. After close they fail at once on the closed subscriber.
func (n *notifier) sendOps() {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		if len(n.ops) == 0 {
			n.sending = false
			n.mu.Unlock()
			return
		}
		op := n.ops[0]
		n.ops = n.ops[1:]
		n.mu.Unlock()
		switch {
		case op.close:
			_ = op.ps.Close()
		case op.unsub:
			_ = op.ps.Unsubscribe(n.ctx, op.chans...)
		default:
			_ = op.ps.Subscribe(n.ctx, op.chans...)
		}
	}
}

// close stops the subscriber and waits for it to exit. Waiters still parked
// go on by their timed retries; later ones poll.
func (n *notifier) close() {
	if n == nil { // a PollOnly lock's
		return
	}
	n.mu.Lock()
	n.closed = true
	ps := n.ps
	n.ps = nil
	n.mu.Unlock()
	n.cancel()
	if ps != nil {
		_ = ps.Close()
	}
	n.wg.Wait()
}

// receive reads ps until it is closed: notices wake waiters, subscription
// confirmations release the waiters that joined before them.
func (n *notifier) receive(ps *redis.PubSub) {
	defer n.wg.Done()
	retry := newBackoff(10*time.Millisecond, time.Second)
	lastReap := time.Now()
	for {
		msg, err := ps.ReceiveTimeout(n.ctx, subscriberIdle/2)
		switch {
		case err == nil:
			retry = newBackoff(retry.min, retry.max)
			n.deliver(msg)
		case n.ctx.Err() != nil || errors.Is(err, redis.ErrClosed):
			return
		case isTimeout(err):
			// Quiet: make sure the connection still works (a dead one is
			// replaced, and its channels subscribed again, on the next receive).
			_ = ps.Ping(n.ctx)
		default:
			// The connection broke: go-redis reconnects and subscribes the
			// channels again on the next receive; notices sent meanwhile are
			// lost (see deliver). Do not hammer a Redis that is down.
			t := time.NewTimer(retry.next())
			if !sleep(n.ctx, t) {
				return
			}
		}
		if time.Since(lastReap) >= subscriberIdle/4 {
			lastReap = time.Now()
			if n.reap(ps) {
				return
			}
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (n *notifier) deliver(msg any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch m := msg.(type) {
	case *redis.Message:
		c := n.chans[m.Channel]
		switch {
		case c == nil:
		case m.Payload != "":
			c.wakeAddressed(m.Payload)
		default:
			c.wakeOne()
		}
	case *redis.Subscription:
		c := n.chans[m.Channel]
		if c == nil || m.Kind != "subscribe" {
			return
		}
		if !c.confirmed {
			c.confirmed = true
			close(c.ready)
			return
		}
		// Subscribed again after a reconnect: a release may have gone
		// unheard meanwhile, so let one waiter look (every addressed one:
		// only the one a lost notice named would do).
		if len(c.addressed) > 0 {
			for _, w := range c.addressed {
				c.wakeAddressed(w.token)
			}
			return
		}
		c.wakeOne()
	}
}

// reap unsubscribes the channels that have had no waiter for
// subscriberIdle; when none is left it closes ps and reports true.
func (n *notifier) reap(ps *redis.PubSub) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	var idle []string
	for name, c := range n.chans {
		if c.waiting == 0 && time.Since(c.idleSince) >= subscriberIdle {
			idle = append(idle, name)
			delete(n.chans, name)
		}
	}
	if len(n.chans) == 0 {
		if n.ps == ps {
			n.ps = nil
		}
		n.send(psOp{ps: ps, close: true})
		return true
	}
	if len(idle) > 0 {
		n.send(psOp{ps: ps, chans: idle, unsub: true})
	}
	return false
}

// wakeOne hands a notice to the first parked waiter, or, when all of them
// are busy trying, to the next one to park. Called with notifier.mu held.
func (c *channel) wakeOne() {
	if len(c.parked) == 0 {
		c.pending = c.waiting > 0
		return
	}
	w := c.parked[0]
	c.parked = c.parked[1:]
	w.parked = false
	w.wake <- struct{}{} // never blocks: a waiter holds at most the notice it was woken by
}

// wakeAddressed hands a notice to the waiter whose token it names, if it
// is local: at once if parked, else on its next park. Called with
// notifier.mu held.
func (c *channel) wakeAddressed(token string) {
	w := c.addressed[token]
	if w == nil {
		return // another process's waiter, or one that has left
	}
	if !w.parked {
		w.noticed = true
		return
	}
	w.parked = false
	c.parked = slices.DeleteFunc(c.parked, func(o *waiter) bool { return o == w })
	w.wake <- struct{}{}
}

// park waits until a notice, the channel's subscription being confirmed,
// t firing or ctx ending, and reports whether to try again (false: ctx ended).
func (w *waiter) park(ctx context.Context, t *time.Timer) bool {
	n, c := w.n, w.c
	n.mu.Lock()
	if c.pending || w.noticed {
		if w.noticed {
			w.noticed = false
		} else {
			c.pending = false
			w.notice = w.token == ""
		}
		n.mu.Unlock()
		return true
	}
	c.parked = append(c.parked, w)
	w.parked = true
	n.mu.Unlock()
	select {
	case <-w.wake:
		w.notice = w.token == ""
		return true
	case <-w.ready:
		w.ready = nil
		w.unpark(false)
		return true
	case <-t.C:
		w.unpark(false)
		return true
	case <-ctx.Done():
		t.Stop()
		w.unpark(true)
		return false
	}
}

// unpark takes w off the parked queue. If a notice was handed to it
// meanwhile, it is used by the try that follows, or passed on when w gives up.
func (w *waiter) unpark(givingUp bool) {
	n, c := w.n, w.c
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.parked {
		w.parked = false
		c.parked = slices.DeleteFunc(c.parked, func(o *waiter) bool { return o == w })
		return
	}
	<-w.wake // wakeOne sent it under n.mu, before w.parked became false
	switch {
	case w.token != "":
		// An addressed notice is not passed on: the Fair lock's waiter
		// leaving the queue wakes the next in line itself.
	case givingUp:
		c.wakeOne()
	default:
		w.notice = true
	}
}

// tried records that a try of w's got its answer (granted, or held by
// someone else): the notice it was woken by, if any, is used.
func (w *waiter) tried() { w.notice = false }

// leave ends w's wait (acquired, failed or given up). w is not parked. A
// notice it was woken by and did not use goes on to the next parked
// waiter: a waiter that leaves once woken (its budget ended, its caller
// gave up or its try failed before the try's answer) must not keep the
// others parked until their timed retries.
func (w *waiter) leave() {
	n, c := w.n, w.c
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.notice {
		w.notice = false
		c.wakeOne()
	}
	if w.token != "" {
		delete(c.addressed, w.token)
	}
	if c.waiting--; c.waiting == 0 {
		c.pending = false
		c.idleSince = time.Now()
	}
}

// pollShare is how many timed retries per PollInterval the waiters on one
// key in one process make in all, at most (about): with many waiters each
// waits longer, so that the fallback does not become the polling load
// that notices replaced, while one of them still looks soon after a lost
// notice.
const pollShare = 10

// pollDelay is how long a notified waiter waits for a notice before trying
// anyway: uniform in [p/2, p] where p is poll, or poll·waiting/pollShare
// with many waiters, so that waiters do not retry in lockstep, and not much
// past the holder's remaining TTL (pttl, when known), after which the key
// expires without a release.
func (w *waiter) pollDelay(poll, pttl time.Duration) time.Duration {
	w.n.mu.Lock()
	waiting := w.c.waiting
	w.n.mu.Unlock()
	if waiting > pollShare {
		poll = poll * time.Duration(waiting) / pollShare
	}
	d := poll/2 + rand.N(poll/2+1)
	if pttl > 0 && pttl < d {
		d = pttl + rand.N(pttl/8+time.Millisecond)
	}
	return d
}
