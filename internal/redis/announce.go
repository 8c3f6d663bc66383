package redis

import (
	"context"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// The Redis pub/sub channels of the sold-out marks. On RestockChannel,
// a restock announces a new round ("<product id> <round>"), so that every
// replica forgets that it saw the product sold out; on SoldOutChannel, a
// replica whose sale took the last unit announces it ("<product id>
// <round>"), so that every replica answers the crowd after it from memory
// at once. A replica listens to both on one subscription, which delivers
// them in the order Redis received them.
const (
	RestockChannel = "inventory:restocked"
	SoldOutChannel = "inventory:sold-out"
)

// On a Redis Cluster the same announcements go by sharded pub/sub
// (SPUBLISH, SSUBSCRIBE) on these channels instead, which share one slot
// by their hash tag: one subscription, to the shard that owns the slot,
// hears both in the order that shard got them, and no announcement is
// copied to every node of the cluster as a plain PUBLISH is. While that
// shard fails over, announcements are lost, as they are while one Redis
// restarts: marks run out by their ttl.
const (
	ShardRestockChannel = "inventory:{announce}:restocked"
	ShardSoldOutChannel = "inventory:{announce}:sold-out"
)

// Announcements are the channels the replicas announce on through rdb:
// sharded ones on a Redis Cluster, else the plain ones.
type Announcements struct {
	rdb     goredis.UniversalClient
	sharded bool
}

// AnnouncementsOn is the announcements through rdb.
func AnnouncementsOn(rdb goredis.UniversalClient) Announcements {
	_, cluster := rdb.(*goredis.ClusterClient)
	return Announcements{rdb: rdb, sharded: cluster}
}

// Publish announces msg on channel (RestockChannel or SoldOutChannel).
func (a Announcements) Publish(ctx context.Context, channel, msg string) error {
	if !a.sharded {
		err := a.rdb.Publish(ctx, channel, msg).Err()
		if err != nil {
			return unavailable("announce on "+channel, err)
		}
		return nil
	}
	if err := a.rdb.SPublish(ctx, a.shard(channel), msg).Err(); err != nil {
		return unavailable("announce on "+a.shard(channel), err)
	}
	return nil
}

// Subscribe subscribes to both channels at once; Plain names the channel
// of each message it delivers.
func (a Announcements) Subscribe(ctx context.Context) *goredis.PubSub {
	if !a.sharded {
		return a.rdb.Subscribe(ctx, RestockChannel, SoldOutChannel)
	}
	return a.rdb.SSubscribe(ctx, ShardRestockChannel, ShardSoldOutChannel)
}

// shard is channel's sharded name.
func (Announcements) shard(channel string) string {
	if channel == SoldOutChannel {
		return ShardSoldOutChannel
	}
	return ShardRestockChannel
}

// Plain is the plain name of a channel Subscribe delivers.
func (Announcements) Plain(channel string) string {
	switch channel {
	case ShardSoldOutChannel:
		return SoldOutChannel
	case ShardRestockChannel:
		return RestockChannel
	}
	return channel
}

// AnnounceRestock tells every replica that product id is in round round.
func AnnounceRestock(ctx context.Context, rdb goredis.UniversalClient, id string, round int) error {
	return AnnouncementsOn(rdb).Publish(ctx, RestockChannel, id+" "+strconv.Itoa(round))
}

// AnnounceReturn tells every replica that units of product id came back to
// its stock (a cancelled, expired or refunded order): announced on
// RestockChannel without a round, it makes each replica forget the
// product's sold-out marks, whatever their round.
func AnnounceReturn(ctx context.Context, rdb goredis.UniversalClient, id string) error {
	return AnnouncementsOn(rdb).Publish(ctx, RestockChannel, id)
}
