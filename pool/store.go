package pool

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
	"sync"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// DefaultStoreLimit is the spec's bound on live model-scoped observations
// across every pool of the process.
const DefaultStoreLimit = 10000

// digest is a salted HMAC-SHA-256: what the store keeps instead of keys and
// model or bucket names.
type digest [sha256.Size]byte

// obsKey names one observation: a credential (its pool-namespaced ID) and a
// scope (a model, a quota bucket, or the credential-wide auth scope).
type obsKey struct {
	cred  digest
	scope digest
}

// slot is one live observation. Slots live in an arena so that the expiry
// heap can hold 4-byte indexes and the map a 4-byte value.
type slot struct {
	key   obsKey
	until int64 // release, in nanoseconds since the store's epoch
	// floor is the latest end of a rest a provider's trusted advice set
	// in this slot (0: none): a sibling's release (shorten) never ends
	// the cooldown before it, whichever model of a shared quota bucket
	// the advice came with.
	floor int64
	// since is when the latest throttle stored in this slot was
	// recorded: a success sent before it clears nothing.
	since int64
	pos   int32 // index in the expiry heap
}

// Store is the process-wide model-scoped cooldown store shared by every
// pool. It holds at most its limit of live observations, each a pair of
// salted HMAC digests and a monotonic release time; never a key, a model or
// bucket name, or a prompt. A process restart discards it and, with a new
// salt, changes every identity.
//
// At capacity a live observation is never evicted: a new observation that
// does not fit is dropped and raises a scalar overflow deadline that covers
// its capped duration; until then new scoped admission fails closed with a
// *CapacityError.
//
// Expired observations are pruned on every read and write from a min-heap
// of release times, so each operation costs O(log n) for what it prunes
// and O(1) map lookups otherwise. One mutex guards the state; the HMAC work
// happens before it is taken.
type Store struct {
	clk   clock.Clock
	epoch time.Time // carries the clock's monotonic reading, if any
	limit int

	hashers   sync.Pool // *labeler, keyed with the salt
	authScope digest    // the credential-wide auth scope

	mu       sync.Mutex
	index    map[obsKey]int32 // observation -> slot
	slots    []slot
	free     []int32 // unused slots
	heap     []int32 // slots, min-heap by until
	overflow int64   // capacity guard deadline; inactive when <= now
}

// NewStore returns an empty store that reads time from clk (clock.Real()
// when nil) and holds at most limit live observations (DefaultStoreLimit
// when limit <= 0). Its HMAC salt is 32 random bytes from crypto/rand.
func NewStore(clk clock.Clock, limit int) *Store {
	if clk == nil {
		clk = clock.Real()
	}
	if limit <= 0 {
		limit = DefaultStoreLimit
	}
	limit = min(limit, math.MaxInt32) // slots are indexed with int32
	var salt [32]byte
	_, _ = rand.Read(salt[:]) // never fails: crypto/rand crashes the process instead
	s := &Store{
		clk:   clk,
		epoch: clk.Now(),
		limit: limit,
		index: make(map[obsKey]int32),
	}
	s.hashers.New = func() any {
		return &labeler{h: hmac.New(sha256.New, salt[:])}
	}
	s.authScope = s.label(labelAuthScope)
	return s
}

// Label kinds: each is the first field of the HMAC input, so that model
// names, bucket names, credential IDs and the auth scope occupy distinct
// namespaces.
const (
	labelCredential = "credential"
	labelModel      = "model"
	labelBucket     = "quota_bucket"
	labelAuthScope  = "credential_wide_auth"
)

// maxPooledLabel bounds the buffer a pooled labeler keeps.
const maxPooledLabel = 1 << 10

// labeler is a reusable keyed hash; the store pools them so that hashing
// allocates nothing.
type labeler struct {
	h   hash.Hash
	buf []byte
}

// label returns HMAC-SHA-256(salt, kind, parts...) over an unambiguous
// encoding: every field is preceded by its length.
func (s *Store) label(kind string, parts ...string) digest {
	l := s.hashers.Get().(*labeler)
	l.buf = appendField(l.buf[:0], kind)
	for _, p := range parts {
		l.buf = appendField(l.buf, p)
	}
	l.h.Reset()
	l.h.Write(l.buf)
	clear(l.buf) // names and keys do not linger in pooled buffers
	l.buf = l.h.Sum(l.buf[:0])
	var d digest
	copy(d[:], l.buf)
	if cap(l.buf) > maxPooledLabel {
		l.buf = nil // an outsized name does not stay pinned in the pool
	}
	s.hashers.Put(l)
	return d
}

// appendField appends a length-prefixed field.
func appendField(b []byte, f string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
	return append(b, f...)
}

// credentialID is the pool-namespaced identity of a key.
func (s *Store) credentialID(pool, key string) digest {
	return s.label(labelCredential, pool, key)
}

// since returns t on the store's monotonic time base: nanoseconds since its
// epoch. t comes from the pool's clock, which should be the store's.
func (s *Store) since(t time.Time) int64 { return int64(t.Sub(s.epoch)) }

// at turns a store time back into a time.Time.
func (s *Store) at(ns int64) time.Time { return s.epoch.Add(time.Duration(ns)) }

// Len returns the number of live observations, pruning expired ones first.
func (s *Store) Len() int {
	now := s.since(s.clk.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune(now)
	return len(s.index)
}

// The methods below expect s.mu to be held.

// prune drops every observation released at or before now.
func (s *Store) prune(now int64) {
	for len(s.heap) > 0 && s.slots[s.heap[0]].until <= now {
		s.removeSlot(s.heap[0])
	}
}

// lookup returns the release of k, or 0 when it is not stored. Call prune
// first so that a stored release is live.
func (s *Store) lookup(k obsKey) int64 {
	if i, ok := s.index[k]; ok {
		return s.slots[i].until
	}
	return 0
}

// put stores k until the later of its current release and until. A new
// observation that does not fit is dropped: it raises the overflow
// deadline to until instead, and started reports whether that began a
// capacity guard. It never evicts a live observation.
func (s *Store) put(k obsKey, until, floor, now int64) (kept, started bool) {
	s.prune(now)
	if i, ok := s.index[k]; ok {
		s.slots[i].floor = max(s.slots[i].floor, floor)
		s.slots[i].since = now
		if until > s.slots[i].until {
			s.slots[i].until = until
			s.down(int(s.slots[i].pos))
		}
		return true, false
	}
	if len(s.index) >= s.limit {
		started = s.overflow <= now
		s.overflow = max(s.overflow, until)
		return false, started
	}
	var i int32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		s.slots = append(s.slots, slot{})
		i = int32(len(s.slots) - 1)
	}
	s.slots[i] = slot{key: k, until: until, floor: floor, since: now, pos: int32(len(s.heap))}
	s.heap = append(s.heap, i)
	s.up(len(s.heap) - 1)
	s.index[k] = i
	return true, false
}

// remove deletes k if it is stored.
func (s *Store) remove(k obsKey, now int64) {
	s.prune(now)
	if i, ok := s.index[k]; ok {
		s.removeSlot(i)
	}
}

// removeIfBefore deletes k unless the observation it holds was recorded
// after sent: a success sent before the throttle that cooled k (in flight
// through it) says nothing of the quota since.
func (s *Store) removeIfBefore(k obsKey, sent, now int64) {
	s.prune(now)
	if i, ok := s.index[k]; ok && s.slots[i].since <= sent {
		s.removeSlot(i)
	}
}

// shorten moves the release of k from was to until (< was), but never
// before the end of a rest trusted advice set (slot.floor), or removes k
// when that is not after now. It reports whether it did: not when k is
// gone or its release changed since it read was (a new throttle rested
// it again), or when the advice leaves nothing to shorten.
func (s *Store) shorten(k obsKey, was, until, now int64) bool {
	i, ok := s.index[k]
	if ok {
		until = max(until, s.slots[i].floor)
	}
	if !ok || s.slots[i].until != was || until >= was {
		return false
	}
	if until <= now {
		s.removeSlot(i)
		return true
	}
	s.slots[i].until = until
	s.up(int(s.slots[i].pos))
	return true
}

// clip ends, by until at the latest, every live observation of the
// credentials in creds (a reload lowered their pool's cap: a cooldown set
// under the old one would outlast the new), and their advice floors with
// them, and the capacity guard: it covers a dropped observation's capped
// TTL, which under the new cap ends by until too (the cap binds every
// pool alike).
func (s *Store) clip(creds map[digest]bool, until, now int64) {
	s.prune(now)
	s.overflow = min(s.overflow, until)
	for _, i := range s.index {
		sl := &s.slots[i]
		if !creds[sl.key.cred] {
			continue
		}
		sl.floor = min(sl.floor, until)
		if sl.until > until {
			sl.until = until
			s.up(int(sl.pos))
		}
	}
}

// overflowUntil returns the capacity guard deadline, or 0 when no guard
// is active at now.
func (s *Store) overflowUntil(now int64) int64 {
	if s.overflow <= now {
		return 0
	}
	return s.overflow
}

func (s *Store) removeSlot(i int32) {
	sl := &s.slots[i]
	delete(s.index, sl.key)
	pos := int(sl.pos)
	last := len(s.heap) - 1
	if pos != last {
		s.swap(pos, last)
	}
	s.heap = s.heap[:last]
	if pos != last {
		s.down(pos)
		s.up(pos)
	}
	*sl = slot{}
	s.free = append(s.free, i)
}

func (s *Store) less(a, b int) bool {
	return s.slots[s.heap[a]].until < s.slots[s.heap[b]].until
}

func (s *Store) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.slots[s.heap[a]].pos = int32(a)
	s.slots[s.heap[b]].pos = int32(b)
}

func (s *Store) up(j int) {
	for j > 0 {
		parent := (j - 1) / 2
		if !s.less(j, parent) {
			return
		}
		s.swap(j, parent)
		j = parent
	}
}

func (s *Store) down(j int) {
	n := len(s.heap)
	for {
		c := 2*j + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && s.less(r, c) {
			c = r
		}
		if !s.less(c, j) {
			return
		}
		s.swap(j, c)
		j = c
	}
}
