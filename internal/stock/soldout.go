package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"inventory/internal/inventory"
	"inventory/internal/postgres"
	"inventory/internal/redis"

	goredis "github.com/redis/go-redis/v9"
)

// SoldOut is one replica's memory of the products it has seen sold out: the
// crowd that arrives after the last unit is answered ErrSoldOut from memory,
// with no Postgres, Redis or lock, until the product is restocked.
//
// A mark is used only once it is recorded in Postgres (soldout_marks: this
// replica, the product, its round, until when), and only if the stock row
// shows nothing left when it is recorded; the row is read FOR SHARE, so a
// mark is either recorded before a restock can commit or not at all. A
// restock then waits (Restocked) until no mark of an older round is
// recorded and running anywhere: every replica has dropped it (on the
// restock's announcement) or it has run out. So once a restock has been
// answered, no replica answers sold-out for an older round.
//
// A mark is set when a sale leaves 0 in stock or a one-unit order is told
// ErrSoldOut (so nothing at all is left; a larger order refused says nothing
// about a smaller one), and when another replica announces that its sale
// left 0 (see Listen): otherwise every replica but the one that sold the
// last unit would put its share of the crowd through the strategy, and a
// lock strategy queues them, until one of them is told. An announcement of
// a round older than a restock already heard of is ignored. A mark is
// dropped when Restock's announcement arrives, and it expires after ttl:
// the next buyer then reads the stock row (one indexed read, no lock) and
// renews the mark while it shows 0, else goes through the strategy. So a
// lost restock announcement, a stale sell-out one, or a lua counter that
// said 0 while a reservation was about to be given back, costs at most ttl
// of wrong 409s. A sale that was in flight while a restock announcement
// arrived sets no mark: its answer may be from the old round.
type SoldOut struct {
	ttl    time.Duration
	now    func() time.Time
	store  *postgres.Store
	holder string // this replica's rows in soldout_marks

	mu    sync.Mutex
	marks map[string]time.Time // product id → when its mark expires
	// forgets counts announcements; a sale only marks when none arrived
	// while it was in flight.
	forgets uint64
	// rounds is the newest round a restock announcement named, per product:
	// a sell-out announced for an older round is stale.
	rounds map[string]int

	// outbox holds the sell-outs this replica's sales saw, for Listen to
	// announce; when it is full (Redis slow or down) they are dropped.
	outbox chan string
	// onRestock, when set, hears of every restock (OnRestock).
	onRestock func(id string)
}

const (
	// maxMarks bounds the memory of marks; beyond it expired marks are pruned.
	maxMarks = 4096
	// maxRounds bounds the memory of rounds; beyond it, it starts afresh
	// (a stale sell-out announcement then costs at most ttl of 409s).
	maxRounds = 1 << 16
	// outboxSize is how many sell-outs may wait to be announced.
	outboxSize = 64
	// maxMarking bounds the sell-outs announced elsewhere that Listen
	// marks at once.
	maxMarking = 8
)

// NewSoldOut returns an empty memory whose marks last at most ttl, recorded
// in st's Postgres under holder (unique per replica process).
func NewSoldOut(ttl time.Duration, st *postgres.Store, holder string) *SoldOut {
	return &SoldOut{ttl: ttl, now: time.Now, store: st, holder: holder, marks: map[string]time.Time{}, rounds: map[string]int{},
		outbox: make(chan string, outboxSize)}
}

// Wrap returns a Seller that answers ErrSoldOut from memory for a product
// marked sold out, and otherwise sells by s, marking the product when the
// answer shows it sold out. An order with an Idempotency-Key that an earlier
// sale used still gets that sale (one indexed read of the ledger), never a 409.
func (m *SoldOut) Wrap(s inventory.Seller) inventory.Seller {
	return &soldOutSeller{marks: m, inner: s, store: m.store}
}

// OnRestock makes f hear of every restock of a product this replica hears
// of (announced, or made here), e.g. to stop refusing the sales of a round
// that is over (watchdog.Circuits.Recheck). f must not block.
func (m *SoldOut) OnRestock(f func(id string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onRestock = f
}

// Forget drops the mark of product id, e.g. when it is restocked.
func (m *SoldOut) Forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgets++
	delete(m.marks, id)
}

// ForgetAll drops every mark, e.g. when announcements may have been
// missed, and their rows.
func (m *SoldOut) ForgetAll(ctx context.Context) {
	m.mu.Lock()
	m.forgets++
	clear(m.marks)
	m.mu.Unlock()
	_ = m.store.DropMarks(ctx, m.holder, "")
}

// markPoll is how often a restock looks whether the marks are gone.
const markPoll = 5 * time.Millisecond

// Marked reports whether product id is marked sold out now.
func (m *SoldOut) Marked(id string) bool {
	marked, _ := m.lookup(id)
	return marked
}

// lookup reports whether product id is marked now, or was until its mark
// expired (which is kept until drop or mark decides).
func (m *SoldOut) lookup(id string) (marked, expired bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.marks[id]
	if !ok {
		return false, false
	}
	if m.now().Before(until) {
		return true, false
	}
	return false, true
}

// drop forgets product id's expired mark without counting an announcement.
func (m *SoldOut) drop(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if until, ok := m.marks[id]; ok && !m.now().Before(until) {
		delete(m.marks, id)
	}
}

// begin returns the token a sale hands to mark when it ends.
func (m *SoldOut) begin() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.forgets
}

// mark records product id sold out and marks it, unless an announcement
// arrived since begin returned token or its stock row shows units left. It
// reports whether id is marked.
func (m *SoldOut) mark(ctx context.Context, id string, token uint64) bool {
	// The mark lasts ttl from before it was recorded, so it ends here
	// before its row ends in Postgres.
	start := m.now()
	recorded, err := m.store.RecordMark(ctx, m.holder, id, m.ttl)
	if err != nil || !recorded {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forgets != token {
		return false
	}
	m.markLocked(id, start)
	return true
}

// markLocked marks product id sold out for ttl from start; m.mu is held.
func (m *SoldOut) markLocked(id string, start time.Time) {
	now := m.now()
	if len(m.marks) >= maxMarks {
		for k, until := range m.marks {
			if !now.Before(until) {
				delete(m.marks, k)
			}
		}
		if len(m.marks) >= maxMarks {
			return
		}
	}
	m.marks[id] = start.Add(m.ttl)
}

// restocked forgets product id's mark here and its records of older rounds
// than round, its new round (see Store.DropMarksBefore).
func (m *SoldOut) restocked(ctx context.Context, id string, round int) {
	m.restockedThrough(ctx, m.store, id, round)
}

// restockedThrough is restocked, its records dropped through db: a restock
// made here drops them in its own transaction, which holds the product's
// row, so that it never waits for a connection of a pool that the sales
// queued behind that row may have taken.
func (m *SoldOut) restockedThrough(ctx context.Context, db marksDropper, id string, round int) {
	m.mu.Lock()
	m.forgets++
	delete(m.marks, id)
	if round > m.rounds[id] {
		if len(m.rounds) >= maxRounds {
			clear(m.rounds)
		}
		m.rounds[id] = round
	}
	heard := m.onRestock
	m.mu.Unlock()
	if heard != nil {
		heard(id)
	}
	_ = db.DropMarksBefore(ctx, m.holder, id, round)
}

// returnedThrough forgets product id's mark here and drops its records of
// rounds up to round through db, the return's transaction (see
// restockedThrough): units came back to the round's stock.
func (m *SoldOut) returnedThrough(ctx context.Context, db marksDropper, id string, round int) {
	m.Forget(id)
	_ = db.DropMarksBefore(ctx, m.holder, id, round+1)
}

// soldOutElsewhere marks product id, which another replica saw sold out in
// round, unless a restock to a later round has been heard of.
func (m *SoldOut) soldOutElsewhere(ctx context.Context, id string, round int) {
	m.mu.Lock()
	stale, token := round < m.rounds[id], m.forgets
	m.mu.Unlock()
	if !stale {
		m.mark(ctx, id, token)
	}
}

// receive acts on one announcement from channel.
func (m *SoldOut) receive(ctx context.Context, channel, payload string) {
	id, r, _ := strings.Cut(payload, " ")
	round, err := strconv.Atoi(r)
	switch {
	case channel == redis.SoldOutChannel && err == nil:
		m.soldOutElsewhere(ctx, id, round)
	case channel == redis.SoldOutChannel: // unreadable: marking is never required
	case err == nil:
		m.restocked(ctx, id, round)
	default: // a return (redis.AnnounceReturn), or unreadable: forgetting is always safe
		m.Forget(id)
		_ = m.store.DropMarks(ctx, m.holder, id)
	}
}

// announceSoldOut queues the news that a sale left product id with nothing
// in round, for Listen to publish; it never waits.
func (m *SoldOut) announceSoldOut(id string, round int) {
	select {
	case m.outbox <- id + " " + strconv.Itoa(round):
	default:
	}
}

// Listen forgets each product Restock announces on RestockChannel and marks
// each product another replica announces on SoldOutChannel, until ctx ends;
// and it announces there the sell-outs this replica's sales see. Whenever the
// subscription is (re)established it forgets every mark, since restock
// announcements may have been missed while it was down. On a Redis Cluster
// (rdb a *goredis.ClusterClient) the channels are the sharded ones.
func (m *SoldOut) Listen(ctx context.Context, rdb goredis.UniversalClient, log *slog.Logger) {
	ann := redis.AnnouncementsOn(rdb)
	var announcing sync.WaitGroup
	defer announcing.Wait()
	announcing.Go(func() { m.announce(ctx, ann, log) })
	defer func() {
		// Stopping: no restock should wait for this replica's marks.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		m.ForgetAll(dctx)
	}()
	// Sell-outs announced elsewhere are marked beside the loop (at most
	// maxMarking at once, the rest dropped: marking is never required).
	// Recording a mark reads the stock row FOR SHARE, which a restock holds
	// while it waits for this replica to drop its marks on hearing of the
	// restock, the next message on this subscription: a mark made in the
	// loop held the restock up until its marks ran out. Ended before the
	// marks are forgotten above.
	var marking sync.WaitGroup
	defer marking.Wait()
	slots := make(chan struct{}, maxMarking)

	sub := ann.Subscribe(ctx)
	// Receive does not return when ctx ends, only when its connection does.
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	defer func() {
		if stop() {
			_ = sub.Close()
		}
	}()
	for {
		msg, err := sub.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		switch msg := msg.(type) {
		case *goredis.Subscription:
			m.ForgetAll(ctx)
		case *goredis.Message:
			channel := ann.Plain(msg.Channel)
			if channel != redis.SoldOutChannel {
				m.receive(ctx, channel, msg.Payload)
				break
			}
			select {
			case slots <- struct{}{}:
				marking.Go(func() {
					defer func() { <-slots }()
					m.receive(ctx, channel, msg.Payload)
				})
			default:
			}
		default:
			if err != nil {
				// go-redis reconnects and resubscribes on the next Receive;
				// marks expire meanwhile.
				log.Debug("restock announcements: subscription interrupted", "err", err)
				if inventory.Sleep(ctx, 100*time.Millisecond) != nil {
					return
				}
			}
		}
	}
}

// announce publishes the queued sell-outs until ctx ends. One that fails is
// not retried: the other replicas then learn it as they did without it.
func (m *SoldOut) announce(ctx context.Context, ann redis.Announcements, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case msg := <-m.outbox:
			// go-redis's own timeouts bound a publish to a Redis that
			// does not answer; meanwhile later ones wait in the outbox.
			if err := ann.Publish(ctx, redis.SoldOutChannel, msg); err != nil && ctx.Err() == nil {
				log.Debug("sold-out announcement not sent", "announcement", msg, "err", err)
			}
		}
	}
}

type soldOutSeller struct {
	marks *SoldOut
	inner inventory.Seller
	store *postgres.Store
}

func (s *soldOutSeller) Sell(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	marked, expired := s.marks.lookup(o.ProductID)
	if marked {
		return s.fromMemory(ctx, o)
	}
	token := s.marks.begin()
	if expired {
		// Renew from the stock row itself (one indexed write, no lock)
		// rather than send every buyer that arrives meanwhile through the
		// strategy, which for a lock strategy means queueing for the lock.
		if s.marks.mark(ctx, o.ProductID, token) {
			return s.fromMemory(ctx, o)
		}
		s.marks.drop(o.ProductID)
	}
	sale, err := s.inner.Sell(ctx, o)
	if soldOutNow(o, sale, err) {
		s.marks.mark(ctx, o.ProductID, token)
		if err == nil {
			// The sale that took the last unit knows its round, so the
			// other replicas can tell a stale announcement.
			s.marks.announceSoldOut(o.ProductID, sale.Round)
		}
	}
	return sale, err
}

// fromMemory answers an order for a product marked sold out.
func (s *soldOutSeller) fromMemory(ctx context.Context, o inventory.Order) (inventory.Sale, error) {
	if err := o.Validate(); err != nil {
		return inventory.Sale{}, err
	}
	if o.IdempotencyKey != "" {
		if earlier, found, err := s.store.Replay(ctx, o); err != nil || found {
			return earlier, err
		}
	}
	return inventory.Sale{}, soldOutFromMemory{o.ProductID}
}

// soldOutFromMemory is ErrSoldOut told from a mark. It is worded only when
// someone reads it: the crowd after a sell-out gets thousands a second, and
// the API only asks which sentinel it wraps.
type soldOutFromMemory struct{ id string }

func (e soldOutFromMemory) Error() string {
	return fmt.Sprintf("%q was sold out when this replica last looked: %v", e.id, inventory.ErrSoldOut)
}

func (soldOutFromMemory) Unwrap() error { return inventory.ErrSoldOut }

// soldOutNow reports whether a Sell's answer shows the product has nothing
// left: a fresh sale leaving 0, or a one-unit order refused as sold out.
func soldOutNow(o inventory.Order, sale inventory.Sale, err error) bool {
	if err == nil {
		return !sale.Replayed && sale.Remaining == 0
	}
	return o.Quantity == 1 && errors.Is(err, inventory.ErrSoldOut)
}

var _ inventory.Seller = (*soldOutSeller)(nil)
