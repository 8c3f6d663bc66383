// Package zkbreak is zklock's Breaker (package breaker): it finds a
// product's lock in ZooKeeper (INVENTORY_ZOOKEEPER_SERVERS) and deletes
// the holder's node (Holder: the lowest sequence under Root+"/"+name), as
// its session's expiry would. The holder's watch on it cancels its lease.
package zkbreak

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"inventory/internal/lock/breaker"
)

// Where zklock keeps a lock named name, with its default options (the
// service's); faults' TestLockLayoutAgreesWithTheBackends holds them
// against what zklock writes.
const (
	// Setting is zklock.Setting.
	Setting = "INVENTORY_ZOOKEEPER_SERVERS"
	// Root is zklock.DefaultRoot: name's lock nodes are the children of
	// Root+"/"+name.
	Root = "/inventory/locks"
	// protected marks a lock node (Curator's protected node,
	// _c_<guid>-lock-<sequence>); seqDigits is the width of the sequence
	// ZooKeeper appends.
	protected = "_c_"
	seqDigits = 10
)

// settle is Holder.Settle for ZooKeeper holders: far more than a Lock
// needs to see its node is the oldest, far less than a critical section.
const settle = 10 * time.Millisecond

// sessionTimeout is the breaker's own ZooKeeper session's timeout.
const sessionTimeout = 10 * time.Second

// Breaker is zklock's.
var Breaker = breaker.Breaker{
	Backend: "zklock",
	Where:   "ZooKeeper",
	Open: func(ctx context.Context, s breaker.Servers) (breaker.Locks, bool, error) {
		var servers []string
		for a := range strings.SplitSeq(s.Settings[Setting], ",") {
			if a = strings.TrimSpace(a); a != "" {
				servers = append(servers, a)
			}
		}
		if len(servers) == 0 {
			return nil, false, nil
		}
		conn, events, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
		if err != nil {
			return nil, false, fmt.Errorf("connect to ZooKeeper at %v: %w", servers, err)
		}
		for conn.State() != zk.StateHasSession {
			select {
			case <-events:
			case <-ctx.Done():
				conn.Close()
				return nil, false, fmt.Errorf("no ZooKeeper session at %v: %w", servers, ctx.Err())
			}
		}
		return locks{conn}, true, nil
	},
}

// quiet drops go-zookeeper's log lines: failures reach the fault as errors.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

type locks struct{ conn *zk.Conn }

func (l locks) Close() { l.conn.Close() }

func (l locks) Holder(_ context.Context, name string) (breaker.Holder, bool, error) {
	parent := Root + "/" + name
	children, _, err := l.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return breaker.Holder{}, false, nil
	}
	if err != nil {
		return breaker.Holder{}, false, fmt.Errorf("list %s: %w", parent, err)
	}
	node, ok := Holder(children)
	if !ok {
		return breaker.Holder{}, false, nil
	}
	path := parent + "/" + node // unique to one acquisition: sequence and GUID
	take := func(context.Context) (bool, error) {
		switch err := l.conn.Delete(path, -1); {
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("delete %s: %w", path, err)
		}
		return true, nil
	}
	return breaker.Holder{ID: path, Take: take, Settle: settle}, true, nil
}

// Holder is the lock node among a lock's children that holds it, the
// lowest sequence (zklock.Holder), or false when none is a lock node.
func Holder(children []string) (string, bool) {
	best, bestSeq := "", int64(-1)
	for _, c := range children {
		if len(c) < seqDigits || !strings.HasPrefix(c, protected) {
			continue
		}
		n, err := strconv.ParseInt(c[len(c)-seqDigits:], 10, 64)
		if err != nil {
			continue
		}
		if bestSeq < 0 || n < bestSeq {
			best, bestSeq = c, n
		}
	}
	return best, bestSeq >= 0
}
