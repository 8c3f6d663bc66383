package netproxy

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// commitComplete is Postgres's CommandComplete message for a COMMIT that
// committed: 'C', its length (4 + len("COMMIT\x00")), the tag.
var commitComplete = []byte("C\x00\x00\x00\x0bCOMMIT\x00")

// callCommitted is a CALL completed outside a transaction block, which
// Postgres committed on its own (the one-statement sale, CALL sell(…)):
// its CommandComplete, then ReadyForQuery with status 'I' (idle: no
// transaction open).
var callCommitted = []byte("C\x00\x00\x00\x09CALL\x00Z\x00\x00\x00\x05I")

// committed reports whether data holds the reply to a commit: a COMMIT
// that committed, or a CALL outside a transaction block.
func committed(data []byte) bool {
	return bytes.Contains(data, commitComplete) || bytes.Contains(data, callCommitted)
}

// commitReplyLost is a toxic for the server-to-client stream of a Postgres
// link: the first reply to a COMMIT that committed (or to a CALL that
// committed on its own, outside a transaction block: a one-statement sale)
// is dropped and its connection closed, so the client never learns that
// its transaction committed. Later replies pass. One value serves every connection of
// the link, so it strikes once per toxic.
type commitReplyLost struct {
	struck atomic.Bool
}

func (t *commitReplyLost) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			// A reply split across chunks is not recognised: that COMMIT
			// goes through and the toxic waits for the next one.
			if committed(c.Data) && t.struck.CompareAndSwap(false, true) {
				stub.Close()
				return
			}
			stub.Output <- c
		}
	}
}

func init() { toxics.Register("commit_reply_lost", new(commitReplyLost)) }

// LoseCommitReply makes the next reply to a COMMIT that committed (or to
// a CALL that committed on its own), on any
// connection through p (a link to Postgres), never arrive: it is dropped
// and its connection closed, after Postgres committed. struck reports
// whether that has happened; Heal removes the toxic.
func (p *Proxy) LoseCommitReply() (struck func() bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	name := fmt.Sprintf("commit-reply-lost-%d", p.n)
	spec := fmt.Sprintf(`{"name":%q,"type":"commit_reply_lost","stream":"downstream","toxicity":1,"attributes":{}}`, name)
	w, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(spec))
	if err != nil {
		return nil, fmt.Errorf("proxy %s: add commit_reply_lost toxic: %w", p.proxy.Name, err)
	}
	t, ok := w.Toxic.(*commitReplyLost)
	if !ok {
		return nil, fmt.Errorf("proxy %s: commit_reply_lost toxic is a %T", p.proxy.Name, w.Toxic)
	}
	return t.struck.Load, nil
}
