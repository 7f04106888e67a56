package auth

import (
	"hash/maphash"
	"sync"
	"time"
)

// verified remembers tokens that passed every check of User, until their
// expiry, so that a user's next requests with the same token (retries,
// status polls: what a flash sale's buyers do) cost a map lookup instead of
// a JWT parse and an HMAC. It holds what verification established and
// nothing more: a hit still checks the expiry against the clock, the key
// set cannot change under it (it is fixed for the process), and it is
// bounded (a full shard drops an entry to make room).
type verified struct {
	seed   maphash.Seed
	shards [verifiedShards]verifiedShard
}

const (
	verifiedShards   = 16
	verifiedPerShard = 4096 // 65,536 tokens in all: a few MB
)

type verifiedShard struct {
	mu sync.Mutex
	m  map[string]verifiedToken
}

type verifiedToken struct {
	user int64
	iat  time.Time // checked against the user's revocation epoch on every hit
	exp  time.Time // the token's exp plus the leeway User allows
}

func newVerified() *verified {
	v := &verified{seed: maphash.MakeSeed()}
	for i := range v.shards {
		v.shards[i].m = make(map[string]verifiedToken, verifiedPerShard)
	}
	return v
}

func (v *verified) shard(token string) *verifiedShard {
	return &v.shards[maphash.String(v.seed, token)%verifiedShards]
}

// get returns the user and issue time of a verified token that has not
// expired at now.
func (v *verified) get(token string, now time.Time) (int64, time.Time, bool) {
	s := v.shard(token)
	s.mu.Lock()
	t, ok := s.m[token]
	if ok && !now.Before(t.exp) {
		delete(s.m, token)
		ok = false
	}
	s.mu.Unlock()
	return t.user, t.iat, ok
}

func (v *verified) put(token string, user int64, iat, exp time.Time) {
	s := v.shard(token)
	s.mu.Lock()
	if len(s.m) >= verifiedPerShard {
		for k := range s.m { // an arbitrary entry: Go's map iteration order is random
			delete(s.m, k)
			break
		}
	}
	s.m[token] = verifiedToken{user: user, iat: iat, exp: exp}
	s.mu.Unlock()
}
