package luascripts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// This file is the scripts' ABI: the keys of a lock, the calls (KEYS and
// ARGV in the order the scripts read them) and the replies. The engine
// builds every call here, and reads every reply with the names here.
//
// The engine calls a kind's scripts with the same KEYS and ARGV whatever the
// kind; each script uses what it needs:
//
//	acquire  KEYS lock, fence, queue, readers, gone
//	         ARGV owner, lease ms, "1" to wait (Lock) or "0" (TryLock),
//	              waiter timeout ms, wake-up channel, publish command,
//	              owner of the caller's hold of the Within mode, or "",
//	              "1" for the owner's first attempt, else "0" (a release
//	              hands the lock only to an owner an attempt queued: a
//	              first attempt needs no look for a hand-over)
//	         → {1, token} when acquired, {0, wait ms} when not, where wait is
//	           how long nothing changes without a wake-up (-1: unknown,
//	           -2: try again at once); a kind that queues waiters adds
//	           queued (1 when the owner is queued) and, when it is, the
//	           server's clock in ms; a reader recorded as waiting adds 2
//	           (Recorded) and the clock. An owner recorded in gone is
//	           refused (and not queued): its caller gave up before this
//	           landed.
//	reenter  KEYS lock, readers   ARGV owner, lease ms, hold count after
//	         → 1 held at that count, 0 not held. Never shortens the lock's
//	           expiry or a deadline.
//	release  KEYS lock, queue, readers, gone, fence
//	         ARGV owner, wake-up channel, publish command, hold count ended
//	              (n > 1 leaves n − 1; 1 or 0 releases the owner's hold),
//	              gone ms (0, or how long to record owner in gone)
//	         → 1 released, 0 not held; for an owner that does not hold
//	           the lock, it withdraws the owner as a waiter. A release
//	           that leaves the lock free with waiters queued (mutex,
//	           reentrant, fair, rwlock) grants it to the first for what
//	           is left of its deadline, held as that waiter's kind holds
//	           it (whatever the releaser's kind), and publishes "owner
//	           token": that owner holds it from then on; an acquire of
//	           that owner takes the grant up instead (its lease, {1,
//	           token}). A semaphore's waiter first is woken by name
//	           instead, to take the permits with an attempt. A writer's
//	           release that lets the readers recorded as waiting in
//	           hands each its hold the same way, with a token of its own.
//	renew    KEYS lock, readers   ARGV owner, lease ms → 1 renewed, 0 not held
//	heartbeat KEYS lock, queue
//	         ARGV owner, waiter timeout ms, wake-up channel, publish command
//	         → 1 still waiting, 0 not
//
// A kind may take ARGV of its own after these, the same for every acquire
// call of one binding (kind.Spec.AcquireArgs): the semaphore's are the
// permits wanted and the size, and it fails an acquire with a RELOCKINVALID
// error (InvalidCode) when permits are held under another size.
//
// and, whatever the kind:
//
//	force unlock  KEYS lock, readers, gone   ARGV wake-up channel, publish
//	              command, gone ms → 1 was held, 0 not
//	fence raise   KEYS fence   ARGV token → the fence, raised to token
//	redlock renew KEYS lock, fence, gone   ARGV owner, lease ms, token
//	              → 1 renewed (or taken back while free), 0 not held
////	query         KEYS as acquire's   ARGV wake-up channel, publish
//	              command, the kind's own → the kind's own (a kind's
//	              read of its state, kind.Lock.Query: the semaphore's
//	              Available)
//
// Wake-ups for all go on the lock's channel (Keys.Wake): "" wakes every
// waiter, "one" one waiter per client, "unqueued" every waiter that is not
// in the lock's queue (a queued waiter is woken by name when its turn
// comes). Those that name an owner go on the
// channel of that owner's client for the lock, Keys.Wake + ":" + the
// client id (the owner id up to its last ':'), with the command the call
// names: the owner id wakes that owner's waiter, and "owner token" is a
// grant to owner. A force unlock also sends each evicted holder's client
// the loss notice "lost owner" on that channel, always by PUBLISH (in
// cluster mode too: a client hears its notices through one pattern
// subscription). See wake.lua and internal/wake.
//
// Expiries of keys that several owners share (queue, readers, gone) are
// only ever lengthened: callers may use different options.
//
// The queue is one zset, in arrival order, that the kinds sharing a name
// share (see queue.lua): each waiter is two members scored by its arrival,
// its owner id and its record "owner deadline keep grant", where deadline
// is the server time in ms until which the waiter is alive, keep a time
// before which the key cannot expire, and grant what a hand-over makes
// the lock for it, in small letters, followed for a semaphore's waiter by
// the permits it waits for, in decimal with the capitals A–J for the
// digits ("permitsD": 3), so that a record's grant is letters alone, as
// scripts of every version read it (ParseQueue reads them).
//
// Hold counts are named by the client, which knows them, so that a call
// retried after a lost reply never counts twice.
//
// On the wire, acquire and release calls are packed (AcquireCall,
// ReleaseCall): KEYS the lock's key alone, ARGV a few strings, which the
// script unpacks into the KEYS and ARGV above before its body runs
// (wire.lua), the other keys and the channel derived from the lock's key
// by NewKeys's layout. Redis grows a call's KEYS and ARGV tables one
// element at a time, a rehash at each power of two: passed as the header
// names them, the thirteen strings of an acquire and the ten of a release
// were a sixth of the instructions Redis ran for an uncontended pair
// (redistime_test.go).

// Keys are the Redis names of one lock. They share the hash tag {E}, where E
// is the lock's name escaped (see EscapeName), so a lock lives in one
// cluster slot whatever its name holds.
type Keys struct {
	Lock    string // the lock itself: string (mutex) or hash of owner → holds
	Fence   string // the last fencing token issued
	Queue   string // queued waiters of every kind, in arrival order, with their deadlines (see ParseQueue)
	Readers string // rwlock: reader deadlines
	Gone    string // owners whose acquire may still land after they gave up
	Wake    string // the wake-up channel

	lists *keyLists // the calls' KEYS, made once by NewKeys; nil in a literal
}

// keyLists are the KEYS of the calls a Lock+Unlock makes, shared by every
// call of one lock: Call.Keys is never modified.
type keyLists struct {
	lock    [1]string
	acquire [5]string
	renew   [2]string
}

// NewKeys returns the keys of lock name under prefix. The prefix must hold
// no brace (relock.WithKeyPrefix checks it). The keys are substrings of
// one string, and the calls' KEYS share one allocation, so that a lock made
// per call (a lock per entity) costs few allocations.
func NewKeys(prefix, name string) Keys {
	base := prefix + ":{" + EscapeName(name) + "}"
	suffixes := [...]string{"", ":fence", ":queue", ":readers", ":gone", ":wake"}
	var b strings.Builder
	b.Grow(len(suffixes)*len(base) + len(":fence:queue:readers:gone:wake"))
	var ends [len(suffixes)]int
	for i, suffix := range suffixes {
		b.WriteString(base)
		b.WriteString(suffix)
		ends[i] = b.Len()
	}
	all := b.String()
	key := func(i int) string { return all[ends[i]-len(base)-len(suffixes[i]) : ends[i]] }
	k := Keys{Lock: key(0), Fence: key(1), Queue: key(2), Readers: key(3), Gone: key(4), Wake: key(5)}
	k.lists = &keyLists{
		lock:    [1]string{k.Lock},
		acquire: [5]string{k.Lock, k.Fence, k.Queue, k.Readers, k.Gone},
		renew:   [2]string{k.Lock, k.Readers},
	}
	return k
}

// The KEYS of the calls: an acquire's as its header names them (a
// query's), the lock's key alone (a packed call's: wire.lua derives the
// others from it, so k must follow NewKeys's layout), a renewal's; from
// k.lists when NewKeys made k.

func (k Keys) acquireKeys() []string {
	if k.lists != nil {
		return k.lists.acquire[:]
	}
	return []string{k.Lock, k.Fence, k.Queue, k.Readers, k.Gone}
}

func (k Keys) lockKey() []string {
	if k.lists != nil {
		return k.lists.lock[:]
	}
	return []string{k.Lock}
}

func (k Keys) renewKeys() []string {
	if k.lists != nil {
		return k.lists.renew[:]
	}
	return []string{k.Lock, k.Readers}
}

// What a hand-over makes the lock for a queued waiter (QueuedWaiter.Grant):
// the kinds sharing a name hold a lock differently.
const (
	GrantString  = "string"  // the mutex: a string holding the owner id
	GrantHash    = "hash"    // the reentrant and fair lock, a read-write lock's writer: a hash owner id → 1
	GrantPermits = "permits" // the semaphore: its own holder records
)

// A QueuedWaiter is one waiter of a lock's queue (Keys.Queue).
type QueuedWaiter struct {
	Owner      string
	DeadlineMs int64  // server time in ms until which it is alive; purged when first after it
	Grant      string // GrantString, GrantHash or GrantPermits
	Permits    int64  // with GrantPermits, the permits it waits for; 0 when its record does not say
}

// ParseQueue returns the waiters of a queue whose members, in rank order
// (ZRANGE queue 0 -1), are members: in arrival order, with a waiter whose
// deadline passed among them until it is purged. Members that are not a
// waiter's pair (owner id, record) are skipped.
func ParseQueue(members []string) []QueuedWaiter {
	var ws []QueuedWaiter
	for i := 0; i < len(members); i++ {
		owner := members[i]
		if i+1 == len(members) {
			break
		}
		rest, ok := strings.CutPrefix(members[i+1], owner+" ")
		if !ok {
			continue
		}
		fields := strings.Fields(rest) // deadline, keep, grant
		if len(fields) != 3 {
			continue
		}
		deadline, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		grant := strings.TrimRightFunc(fields[2], func(r rune) bool { return 'A' <= r && r <= 'J' })
		permits, _ := strconv.ParseInt(strings.Map(func(r rune) rune { return r - 'A' + '0' }, fields[2][len(grant):]), 10, 64)
		ws = append(ws, QueuedWaiter{Owner: owner, DeadlineMs: deadline, Grant: grant, Permits: permits})
		i++
	}
	return ws
}

// escaper replaces the bytes that would change a key's cluster hash tag,
// and the escape byte itself, so that escaping is one-to-one: two different
// names never share a key, and a name's keys share one slot.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

var unescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// EscapeName returns name as it appears inside a key's braces: '%', '{' and
// '}' percent-encoded, every other byte as it is, so common names stay
// readable in redis-cli.
func EscapeName(name string) string { return escaper.Replace(name) }

// NameOf returns the lock name whose lock key (Keys.Lock) under prefix is
// key, and reports whether key is one; it undoes NewKeys. It reports false
// for every other key: another prefix, a lock's other keys (fence, queue, …),
// an empty name, and any escaping NewKeys does not write (a raw brace, "%7b",
// a stray '%').
func NameOf(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	escaped, ok := strings.CutSuffix(rest, "}")
	if !ok || escaped == "" {
		return "", false
	}
	name := unescaper.Replace(escaped)
	// Unescaping is one-to-one only on what EscapeName writes: "%41" or
	// "%7b" would decode to a name whose key is another string, so only the
	// canonical form is a lock key.
	if EscapeName(name) != escaped {
		return "", false
	}
	return name, true
}

// Replies of the acquire scripts: {Granted, token} when acquired, else {0,
// wait}, where wait is how long, in milliseconds, nothing changes without
// a wake-up, or one of the codes below. A kind whose waiters queue adds a
// third element, 1 when the attempt left the owner queued (see Queued),
// and then a fourth: the server's clock in milliseconds when the attempt
// ran (see ServerMs). A read-write lock's reader recorded as waiting adds
// Recorded and the clock.
const (
	Granted     = 1
	WaitUnknown = -1 // nothing bounds the wait but the waiter's own cap
	WaitRetry   = -2 // what blocked the attempt is gone: try again at once
)

// Recorded is the third element of the reply of a reader's attempt that
// recorded it as waiting for a writer (rw.lua, wait_as_reader): not in the
// queue, so wake-ups for the waiters outside it wake it, and dated, as a
// writer's release hands it its hold by name.
const Recorded = 2

// Replies of the other scripts (reenter, release, renew, heartbeat, force
// unlock, redlock renew).
const (
	Held    = 1 // re-entered, released, renewed, still waiting, or was held
	NotHeld = 0
)

// AcquireReply reads an acquire script's reply: the fencing token when
// granted, else the wait.
func AcquireReply(v []int64) (granted bool, n int64, ok bool) {
	if len(v) < 2 || len(v) > 4 {
		return false, 0, false
	}
	return v[0] == Granted, v[1], true
}

// Queued reports whether an acquire reply says the attempt left the owner
// queued (the mutex's or reentrant lock's starving waiter, or one behind
// starving waiters; a fair lock's or a writer's Lock).
func Queued(v []int64) bool { return len(v) >= 3 && v[2] == 1 }

// ServerMs returns the server's clock, in milliseconds, when the attempt
// whose reply is v queued its owner or recorded it as waiting (Recorded),
// and reports whether the reply says. A hand-over's token is that clock in
// microseconds when the release minted it: a waiter dates the hand-overs
// it is sent with it.
func ServerMs(v []int64) (int64, bool) {
	if len(v) != 4 || (v[2] != 1 && v[2] != Recorded) {
		return 0, false
	}
	return v[3], true
}

// Acquire is an acquire call's arguments.
type Acquire struct {
	Owner    string
	LeaseMs  string
	Wait     bool // a Lock, which may queue the owner; not a TryLock, which never does
	Queue    bool // with Wait: queue the owner if not granted; else only behind waiters queued already (the fair lock and rwlock writers always queue a Lock)
	WaiterMs string
	Publish  string   // "publish", or "spublish" on a cluster
	Within   string   // owner of the caller's hold of the kind's Within mode, or ""
	First    bool     // no attempt of Owner was sent before this one; false is always safe, and costs an acquire a command more behind a queue
	Extra    []string // the kind's own ARGV, after the ABI's (see kind.Spec.AcquireArgs), two at most (wire.lua unpacks two); never modified
}

// maxExtra is how many ARGV of its own a kind may give an acquire call:
// as many as wire.lua's acquire_call unpacks.
const maxExtra = 2

// AcquireCall is the acquire call a of script s on the lock k, packed for
// the wire: KEYS {lock}, ARGV {owner, lease ms, waiter timeout ms, mode,
// the kind's own…}, mode the queue flag, the first-attempt flag, the
// publish command's initial and the Within owner, which the script
// unpacks into the KEYS and ARGV above (wire.lua).
func AcquireCall(s Script, k Keys, a Acquire) Call {
	if len(a.Extra) > maxExtra {
		panic(fmt.Sprintf("luascripts: %d ARGV of a kind's own; the acquire call unpacks %d", len(a.Extra), maxExtra))
	}
	flag := 0 // never queue
	switch {
	case a.Wait && a.Queue:
		flag = 1 // queue
	case a.Wait:
		flag = 2 // queue behind a queue
	}
	first := 0
	if a.First {
		first = 1
	}
	mode := acquireModes[flag][first][publishIndex(a.Publish)]
	if a.Within != "" {
		mode += a.Within
	}
	args := make([]string, 0, 4+len(a.Extra)) // one allocation, Extra included
	args = append(args, a.Owner, a.LeaseMs, a.WaiterMs, mode)
	return Call{Script: s, Keys: k.lockKey(), Args: append(args, a.Extra...)}
}

// acquireModes are the packed modes of the acquire calls without a Within
// owner, by queue flag, first attempt and publish command (publishIndex):
// made once, so that a call allocates none.
var acquireModes = func() (m [3][2][2]string) {
	for flag := range m {
		for first := range m[flag] {
			for pub, initial := range publishInitials {
				m[flag][first][pub] = strconv.Itoa(flag) + strconv.Itoa(first) + initial
			}
		}
	}
	return m
}()

// publishInitials are the initials by which a packed call names the
// publish command, "publish" and "spublish" (wire.lua, publish_of).
var publishInitials = [2]string{"p", "s"}

// publishIndex is the index in publishInitials of the publish command.
func publishIndex(publish string) int {
	if publish == "spublish" {
		return 1
	}
	return 0
}

// QueryCall is the call of script s, a kind's read of its state, on the
// lock k with the kind's own args.
func QueryCall(s Script, k Keys, publish string, args []string) Call {
	return Call{Script: s, Keys: k.acquireKeys(), Args: append([]string{k.Wake, publish}, args...)}
}

// InvalidCode is the code of the Redis error a script fails with when the
// caller's arguments contradict the lock's state in Redis (a semaphore's
// size differing from the one its permits are held under): the caller's
// error, which the client reports as relock.ErrInvalid.
const InvalidCode = "RELOCKINVALID"

// IsInvalid reports whether err is, or wraps, a script's InvalidCode
// error, and returns its message without the code.
func IsInvalid(err error) (string, bool) {
	var e *rueidis.RedisError
	if !errors.As(err, &e) || e == nil {
		return "", false
	}
	msg, found := strings.CutPrefix(e.Error(), InvalidCode+" ")
	return msg, found
}

// ReenterCall is owner's re-entry by script s, naming the hold count after
// it and refreshing the hold for leaseMs.
func ReenterCall(s Script, k Keys, owner, leaseMs string, depth int) Call {
	return Call{Script: s, Keys: []string{k.Lock, k.Readers}, Args: []string{owner, leaseMs, strconv.Itoa(depth)}}
}

// ReleaseCall is the release by script s of owner's hold at depth (0: all
// of it), or the withdrawal of owner as a waiter. A goneMs other than "0"
// also records owner as gone for that long, so that an acquire of owner
// still on its way is refused when it lands. Packed for the wire: KEYS
// {lock}, ARGV {owner, mode[, gone ms]}, mode the publish command's
// initial and depth, gone ms left out when "0", which the script unpacks
// into the KEYS and ARGV above (wire.lua).
func ReleaseCall(s Script, k Keys, owner, publish string, depth int, goneMs string) Call {
	var mode string
	if depth >= 0 && depth < len(releaseModes) {
		mode = releaseModes[depth][publishIndex(publish)]
	} else {
		mode = publishInitials[publishIndex(publish)] + strconv.Itoa(depth)
	}
	if goneMs != "0" {
		return Call{Script: s, Keys: k.lockKey(), Args: []string{owner, mode, goneMs}}
	}
	return Call{Script: s, Keys: k.lockKey(), Args: []string{owner, mode}}
}

// releaseModes are the packed modes of the releases of depth 0 to 9, by
// publish command (publishIndex): made once, so that a release allocates
// none.
var releaseModes = func() (m [10][2]string) {
	for depth := range m {
		for pub, initial := range publishInitials {
			m[depth][pub] = initial + strconv.Itoa(depth)
		}
	}
	return m
}()

// RenewCall is the renewal by script s of owner's hold for ms milliseconds
// from now; the renewal scripts never shorten a lease.
func RenewCall(s Script, k Keys, owner, ms string) Call {
	return Call{Script: s, Keys: k.renewKeys(), Args: []string{owner, ms}}
}

// HeartbeatCall keeps waiting owner's place for waiterMs, by script s.
func HeartbeatCall(s Script, k Keys, owner, waiterMs, publish string) Call {
	return Call{Script: s, Keys: []string{k.Lock, k.Queue}, Args: []string{owner, waiterMs, k.Wake, publish}}
}

// ForceUnlockCall deletes the lock k whoever holds it and wakes its
// waiters; a string owner is recorded as gone for goneMs.
func ForceUnlockCall(k Keys, publish, goneMs string) Call {
	return Call{Script: ForceUnlock, Keys: []string{k.Lock, k.Readers, k.Gone}, Args: []string{k.Wake, publish, goneMs}}
}

// FenceRaiseCall raises the lock's fence to at least token.
func FenceRaiseCall(k Keys, token int64) Call {
	return Call{Script: FenceRaise, Keys: []string{k.Fence}, Args: []string{strconv.FormatInt(token, 10)}}
}

// RedlockRenewCall renews owner's hold on one master for ms milliseconds,
// or takes the lock back there for owner if it is free, with its fence
// raised to token.
func RedlockRenewCall(k Keys, owner, ms string, token int64) Call {
	return Call{Script: RedlockRenew, Keys: []string{k.Lock, k.Fence, k.Gone}, Args: []string{owner, ms, strconv.FormatInt(token, 10)}}
}

// Exec runs c alone: one round trip (two when the server lacks the script).
func (c Call) Exec(ctx context.Context, rc rueidis.Client) rueidis.RedisResult {
	return c.Script.Exec(ctx, rc, c.Keys, c.Args)
}
