package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/luascripts"
)

// defaultMax is how many entries of each holder list, queue and zset
// inspect shows unless --max says otherwise.
const defaultMax = 100

// Kinds, as inspect and list name them.
const (
	kindMutex     = "mutex"
	kindReentrant = "reentrant"
	kindFair      = "fair"
	kindRWLock    = "rwlock"
	kindUnknown   = "unknown" // the lock key is of a type no relock kind uses
)

// modeField is the read-write lock's hash field that holds its mode; every
// other field of its hash is an owner.
const modeField = "mode"

//go:embed inspect.lua
var inspectSource string

// inspectScript reads all of a lock's keys at one moment (see inspect.lua
// and inspect_semaphore.lua). Read-only: EVALSHA_RO, so Redis refuses it
// any write.
var inspectScript = rueidis.NewLuaScriptReadOnly(inspectSemaphoreSource + inspectSource)

// The fields of an inspect.lua key reply.
const (
	rawType = iota
	rawPTTL
	rawSize
	rawEntries
	rawMode
	rawFields
)

// rawKey is one key as inspect.lua describes it.
type rawKey struct {
	typ     string
	pttl    int64 // -2: absent, -1: no expiry
	size    int64 // -1: a type no relock kind uses
	entries []rueidis.RedisMessage
	mode    string // a hash's "mode" field, or ""
}

func (r *rawKey) exists() bool { return r.typ != "none" }

// rawState is inspect.lua's reply.
type rawState struct {
	now                               int64 // server TIME, ms
	lock, fence, queue, readers, gone rawKey
	semaphore                         *rawSemaphore // the lock as a semaphore, or nil
}

// readRaw runs inspect.lua on k, returning at most limit entries of each
// hash, list and zset (0: sizes only).
func readRaw(ctx context.Context, rc rueidis.Client, k luascripts.Keys, limit int) (*rawState, error) {
	return parseRaw(inspectScript.Exec(ctx, rc, inspectKeys(k), []string{strconv.Itoa(limit)}))
}

func inspectKeys(k luascripts.Keys) []string {
	return []string{k.Lock, k.Fence, k.Queue, k.Readers, k.Gone}
}

func parseRaw(res rueidis.RedisResult) (*rawState, error) {
	reply, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	st := &rawState{}
	targets := []*rawKey{&st.lock, &st.fence, &st.queue, &st.readers, &st.gone}
	if len(reply) != 2+len(targets) { // now, the keys, the semaphore
		return nil, fmt.Errorf("inspect script: %d replies, want %d", len(reply), 2+len(targets))
	}
	if st.semaphore, err = parseSemaphore(reply[len(reply)-1]); err != nil {
		return nil, fmt.Errorf("inspect script: semaphore: %w", err)
	}
	if st.now, err = reply[0].AsInt64(); err != nil {
		return nil, fmt.Errorf("inspect script: time: %w", err)
	}
	for i, t := range targets {
		f, err := reply[1+i].ToArray()
		if err == nil && len(f) != rawFields {
			err = fmt.Errorf("%d fields, want %d", len(f), rawFields)
		}
		if err == nil {
			t.typ, err = f[rawType].ToString()
		}
		if err == nil {
			t.pttl, err = f[rawPTTL].AsInt64()
		}
		if err == nil {
			t.size, err = f[rawSize].AsInt64()
		}
		if err == nil {
			t.entries, err = f[rawEntries].ToArray()
		}
		if err == nil && !f[rawMode].IsNil() {
			t.mode, err = f[rawMode].ToString()
		}
		if err != nil {
			return nil, fmt.Errorf("inspect script: key %d: %w", i+1, err)
		}
	}
	return st, nil
}

// lockState is what inspect reports about one lock, and its --json output.
// The JSON field names are stable: scripts may rely on them (see the
// inspect help).
type lockState struct {
	Name         string `json:"name"`
	Prefix       string `json:"prefix"`
	Key          string `json:"key"`
	ServerTimeMs int64  `json:"server_time_ms"`
	Held         bool   `json:"held"`
	// Kind is the lock's kind when its layout tells; "" when it does not
	// (free, or a layout several kinds share: see KindCandidates).
	Kind           string     `json:"kind"`
	KindCandidates []string   `json:"kind_candidates"`
	KindNote       string     `json:"kind_note"`
	Mode           string     `json:"mode"`   // rwlock: "read" or "write"; "" otherwise
	TTLMs          int64      `json:"ttl_ms"` // PTTL of the lock key: -2 free, -1 no expiry
	Holders        []holder   `json:"holders"`
	Readers        []deadline `json:"readers"`
	Queue          []deadline `json:"queue"`
	WaitingWriters []deadline `json:"waiting_writers"`
	Gone           []deadline `json:"gone"`
	Counts         counts     `json:"counts"`
	Truncated      bool       `json:"truncated"`
	Fence          fenceState `json:"fence"`
	Keys           []keyState `json:"keys"`
	Wake           wakeState  `json:"wake"`
	// Semaphore is the lock as a semaphore; nil (null) for other kinds.
	Semaphore *semaphoreState `json:"semaphore"`
}

type holder struct {
	Owner string `json:"owner"`
	Label string `json:"label"` // the label the owner id carries, or ""
	Count int64  `json:"count"` // hold count; -1 when Redis holds something else than a number
}

// deadline is an owner with a deadline on the server clock.
type deadline struct {
	Owner string `json:"owner"`
	Label string `json:"label"` // the label the owner id carries, or ""
	// RemainingMs is the deadline minus the server's TIME; ≤ 0 when it has
	// passed and the next script on the lock will purge the owner; null
	// when no deadline is recorded.
	RemainingMs *int64 `json:"remaining_ms"`
}

// counts are the full sizes of the lists, which --max may cut.
type counts struct {
	Holders        int64 `json:"holders"`
	Readers        int64 `json:"readers"`
	Queue          int64 `json:"queue"`
	WaitingWriters int64 `json:"waiting_writers"`
	Gone           int64 `json:"gone"`
}

type fenceState struct {
	Key       string `json:"key"`
	LastToken int64  `json:"last_token"` // 0: none issued
	TTLMs     int64  `json:"ttl_ms"`
}

// keyState is one of the lock's keys that exists.
type keyState struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	TTLMs int64  `json:"ttl_ms"`
	Size  int64  `json:"size"` // elements; -1 for a type no relock kind uses
}

type wakeState struct {
	Channel string `json:"channel"`
	Sharded bool   `json:"sharded"` // cluster mode: sharded pub/sub (SSUBSCRIBE)
	// Subscribers counts the clients subscribed to Channel: one per relock
	// Client with a waiter on the lock (and one per watch). null when the
	// server did not tell.
	Subscribers *int64 `json:"subscribers"`
}

// interpret makes a lockState of raw, the keys k of lock name under prefix.
func interpret(prefix, name string, k luascripts.Keys, raw *rawState) *lockState {
	st := &lockState{
		Name:           name,
		Prefix:         prefix,
		Key:            k.Lock,
		ServerTimeMs:   raw.now,
		Held:           raw.lock.exists(),
		KindCandidates: []string{},
		TTLMs:          raw.lock.pttl,
		Holders:        []holder{},
		Readers:        []deadline{},
		Queue:          []deadline{},
		WaitingWriters: []deadline{},
		Gone:           []deadline{},
		Fence:          fenceState{Key: k.Fence, TTLMs: raw.fence.pttl},
		Keys:           []keyState{},
		Wake:           wakeState{Channel: k.Wake},
	}
	st.inferKind(raw)

	switch raw.lock.typ {
	case "string":
		st.Counts.Holders = 1
		if len(raw.lock.entries) > 0 {
			owner, _ := raw.lock.entries[0].ToString()
			st.Holders = append(st.Holders, holder{Owner: owner, Label: labelOf(owner), Count: 1})
		}
	case "hash":
		st.Counts.Holders = raw.lock.size
		if raw.lock.mode != "" {
			st.Counts.Holders-- // the mode is a field, not an owner
		}
		for _, p := range pairs(raw.lock.entries) {
			n, err := strconv.ParseInt(p.value, 10, 64)
			if err != nil {
				n = -1
			}
			st.Holders = append(st.Holders, holder{Owner: p.member, Label: labelOf(p.member), Count: n})
		}
		slices.SortFunc(st.Holders, func(a, b holder) int { return strings.Compare(a.Owner, b.Owner) })
	}
	if st.Kind == kindRWLock {
		st.Mode = raw.lock.mode
	}

	st.Readers, st.Counts.Readers = deadlines(raw.readers, raw.now)
	st.Gone, st.Counts.Gone = deadlines(raw.gone, raw.now)
	if st.Kind == kindRWLock {
		// A read-write lock's waiting writers, in arrival order.
		st.WaitingWriters, st.Counts.WaitingWriters = queued(raw.queue, raw.now)
	} else {
		// A queue (fair, a semaphore's, or a mutex's or reentrant lock's
		// starving waiters).
		st.Queue, st.Counts.Queue = queued(raw.queue, raw.now)
	}
	st.addSemaphore(raw.semaphore, raw.queue, raw.now)
	st.Truncated = int64(len(st.Holders)) < st.Counts.Holders ||
		int64(len(st.Readers)) < st.Counts.Readers ||
		int64(len(st.Queue)) < st.Counts.Queue ||
		int64(len(st.WaitingWriters)) < st.Counts.WaitingWriters ||
		int64(len(st.Gone)) < st.Counts.Gone

	if raw.fence.typ == "string" && len(raw.fence.entries) > 0 {
		st.Fence.LastToken, _ = raw.fence.entries[0].AsInt64()
	}
	for _, kr := range []struct {
		key string
		raw *rawKey
	}{
		{k.Lock, &raw.lock}, {k.Fence, &raw.fence}, {k.Queue, &raw.queue},
		{k.Readers, &raw.readers}, {k.Gone, &raw.gone},
	} {
		if kr.raw.exists() {
			st.Keys = append(st.Keys, keyState{Key: kr.key, Type: kr.raw.typ, TTLMs: kr.raw.pttl, Size: kr.raw.size})
		}
	}
	return st
}

// inferKind sets the kind from the layout: a string is a mutex; a hash with
// a "mode" field a read-write lock; a hash, with a queue or without, is a
// reentrant lock or a fair lock (a reentrant lock queues waiters that
// starve), which look alike, or a read-write lock's writer that a release
// handed the lock to (its grant has no mode until the writer names it); a
// free lock with a queue may be any kind.
func (st *lockState) inferKind(raw *rawState) {
	set := func(k, note string) {
		st.Kind, st.KindCandidates, st.KindNote = k, []string{k}, note
	}
	switch raw.lock.typ {
	case "string":
		set(kindMutex, "a string holding the owner id")
	case "hash":
		switch {
		case raw.lock.mode != "":
			set(kindRWLock, `a hash with field "mode" and owner id → hold count`)
		case raw.queue.exists():
			st.KindCandidates = []string{kindFair, kindReentrant, kindRWLock}
			st.KindNote = "a hash of owner id → hold count, with a queue: a fair lock, a reentrant lock with starving waiters, or a read-write lock's writer handed the lock"
		default:
			st.KindCandidates = []string{kindReentrant, kindFair, kindRWLock}
			st.KindNote = "a hash of owner id → hold count and no queue: a reentrant lock, a fair lock nobody waits for, or a read-write lock's writer handed the lock"
		}
	case "none":
		switch {
		case raw.queue.exists():
			st.KindCandidates = []string{kindFair, kindReentrant, kindMutex, kindRWLock}
			st.KindNote = "free, with a queue: the first waiter is being handed the lock (a fair lock, a mutex's or reentrant lock's starving waiters, or a read-write lock's waiting writers)"
		case raw.readers.exists():
			set(kindRWLock, "free, with reader deadlines left: the next script on the lock purges them")
		default:
			st.KindNote = "free: no key tells the kind"
		}
	default:
		set(kindUnknown, fmt.Sprintf("the lock key is a %s, which no relock kind uses", raw.lock.typ))
	}
}

type pair struct{ member, value string }

// pairs splits flat member, value entries; a nil value becomes "".
func pairs(entries []rueidis.RedisMessage) []pair {
	ps := make([]pair, 0, len(entries)/2)
	for i := 0; i+1 < len(entries); i += 2 {
		m, _ := entries[i].ToString()
		v, _ := entries[i+1].ToString()
		ps = append(ps, pair{m, v})
	}
	return ps
}

// deadlines returns the owner, deadline pairs of a zset, or of the queue,
// with the deadlines made relative to the server time now, and the key's
// full size.
func deadlines(k rawKey, now int64) ([]deadline, int64) {
	ds := []deadline{}
	if !k.exists() {
		return ds, 0
	}
	for _, p := range pairs(k.entries) {
		d := deadline{Owner: p.member, Label: labelOf(p.member)}
		if score, err := strconv.ParseFloat(p.value, 64); err == nil {
			left := int64(score) - now
			d.RemainingMs = &left
		}
		ds = append(ds, d)
	}
	return ds, max(k.size, 0)
}

// queued returns the waiters of a queue key (see luascripts.ParseQueue) in
// arrival order, with their deadlines made relative to the server time
// now, and how many wait in all.
func queued(k rawKey, now int64) ([]deadline, int64) {
	ds := []deadline{}
	if !k.exists() {
		return ds, 0
	}
	for _, w := range luascripts.ParseQueue(queueMembers(k)) {
		left := w.DeadlineMs - now
		ds = append(ds, deadline{Owner: w.Owner, Label: labelOf(w.Owner), RemainingMs: &left})
	}
	return ds, max(k.size, 0)
}

// queueMembers returns the members of a queue key, in arrival order: the
// waiters' pairs, cut at the limit.
func queueMembers(k rawKey) []string {
	members := make([]string, 0, len(k.entries))
	for _, e := range k.entries {
		m, _ := e.ToString()
		members = append(members, m)
	}
	return members
}

// readLockState reads the state of lock name under prefix: the keys in
// one atomic script, then the wake-up subscribers.
func readLockState(ctx context.Context, rc rueidis.Client, prefix, name string, limit int) (*lockState, error) {
	k := luascripts.NewKeys(prefix, name)
	raw, err := readRaw(ctx, rc, k, limit)
	if err != nil {
		return nil, err
	}
	st := interpret(prefix, name, k, raw)
	st.Wake.Sharded = rc.Mode() == rueidis.ClientModeCluster
	st.Wake.Subscribers = subscribers(ctx, rc, k.Wake)
	return st, nil
}

// subscribers returns the number of clients subscribed to channel, or nil
// when the server does not tell. Relock subscribes with SSUBSCRIBE in
// cluster mode, which PUBSUB NUMSUB does not count.
func subscribers(ctx context.Context, rc rueidis.Client, channel string) *int64 {
	cmd := rc.B().PubsubNumsub().Channel(channel).Build()
	if rc.Mode() == rueidis.ClientModeCluster {
		cmd = rc.B().PubsubShardnumsub().Channel(channel).Build()
	}
	msg, err := rc.Do(ctx, cmd).ToMessage()
	if err != nil {
		return nil
	}
	// RESP3 answers a map, RESP2 an array [channel, count].
	if m, err := msg.AsMap(); err == nil {
		if v, ok := m[channel]; ok {
			if n, err := v.AsInt64(); err == nil {
				return &n
			}
		}
	}
	if a, err := msg.ToArray(); err == nil && len(a) == 2 {
		if n, err := a[1].AsInt64(); err == nil {
			return &n
		}
	}
	return nil
}

const inspectHelp = `Usage: relock inspect --redis host:port [--prefix relock] [--json] NAME

Prints the state of lock NAME, of any kind, without taking or changing it.
All its keys are read by one read-only script, so the output belongs to one
moment; deadlines are shown as time left on the server's clock (TIME), never
the client's.

The kind is inferred from the layout: a string is a mutex; a hash with field
"mode" a read-write lock (the mode is not an owner); a hash with field
"size" a semaphore (with "used" and its holders, each with its expiry;
what its waiters want is in their queue records);
another hash a
reentrant or a fair lock, which look alike (both are then named: a
reentrant lock's starving waiters queue as a fair lock's do). Shown: the
holders with their hold counts, a read-write lock's mode, its readers' and
waiting writers in arrival order with their deadlines, the queue in order
with each waiter's deadline (a fair lock's, or a mutex's or reentrant
lock's starving waiters), owners
that gave up while an acquire was on its way ("gone"), the last fencing
token, every key's TTL, and the clients subscribed to the wake-up channel
(PUBSUB NUMSUB; SHARDNUMSUB in cluster mode).

--json prints one object with these fields:
  name, prefix, key         the lock name, key prefix and lock key
  server_time_ms            the server's TIME in ms when read
  held                      whether the lock key exists
  kind                      "mutex", "reentrant", "fair", "rwlock", "semaphore", "unknown"
                            (a key type no kind uses), or "" when the layout
                            does not tell
  kind_candidates           the kinds the layout fits ([] when free)
  kind_note                 why
  mode                      rwlock: "read" or "write"; else ""
  ttl_ms                    PTTL of the lock key: -2 free, -1 no expiry
  holders                   [{owner, label, count}], by owner; mutex count is 1,
                            a semaphore's the permits held
  readers                   [{owner, label, remaining_ms}], by deadline
  queue                     [{owner, label, remaining_ms}], head first
  waiting_writers           rwlock: [{owner, label, remaining_ms}], in arrival order
  gone                      [{owner, label, remaining_ms}]: owners that gave up
  counts                    {holders, readers, queue, waiting_writers, gone}:
                            full sizes, which --max may cut
  truncated                 whether --max cut a list
  fence                     {key, last_token (0: none), ttl_ms}
  keys                      [{key, type, ttl_ms, size}]: each existing key
  wake                      {channel, sharded, subscribers (null: unknown)}
  semaphore                 null unless the lock is a semaphore; else
                            {size, used, available,
                             holders [{owner, label, permits, token, remaining_ms}],
                             queue [{owner, label, permits (wanted; null:
                             unknown), remaining_ms}] head first}; a
                            holder's remaining_ms is its lease left
remaining_ms is the deadline minus the server time: ≤ 0 means passed (the
next script on the lock purges the owner), null that none is recorded.
label is the label of the owner's Client (relock.WithOwnerLabel), "" if
none; the text output shows such an owner as its id without the label,
then the label in brackets.
Lists are [] when empty, never null.
`

// inspectCommand returns the inspect command line and its --max.
func inspectCommand(stdout, stderr io.Writer) (*command, *int) {
	c := newCommand("inspect", inspectHelp, stdout, stderr)
	c.addRedisFlags(true)
	limit := c.fs.Int("max", defaultMax, "show at most `n` holders, readers, queued owners, waiting writers and gone owners each")
	return c, limit
}

// runInspect runs the inspect subcommand.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, limit := inspectCommand(stdout, stderr)
	names, code := cmd.parse(args, 1, 1)
	if code != proceed {
		return code
	}
	if *limit < 1 {
		return cmd.usageError("--max %d: must be at least 1", *limit)
	}
	return cmd.do(ctx, func(ctx context.Context, rc rueidis.Client) error {
		ctx, cancel := cmd.bound(ctx)
		defer cancel()
		st, err := readLockState(ctx, rc, cmd.prefix, names[0], *limit)
		if err != nil {
			return fmt.Errorf("%s: %w", quote(names[0]), err)
		}
		if cmd.json {
			return writeJSON(stdout, st)
		}
		st.print(stdout)
		return nil
	})
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// print writes the state as aligned "label  value" lines.
func (st *lockState) print(w io.Writer) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-9s %s\n", label, fmt.Sprintf(format, args...))
	}
	line("lock", "%s", quote(st.Key))
	line("name", "%s", quote(st.Name))
	switch {
	case st.Kind != "":
		line("kind", "%s (%s)", st.Kind, st.KindNote)
	case len(st.KindCandidates) > 0:
		line("kind", "%s? (%s)", strings.Join(st.KindCandidates, " or "), st.KindNote)
	default:
		line("kind", "? (%s)", st.KindNote)
	}
	line("state", "%s", st.summary())
	switch {
	case !st.Held:
	case st.TTLMs == -1:
		line("ttl", "none: the key never expires (not set by relock?)")
	case st.TTLMs >= 0:
		line("ttl", "%dms (lease left; a watchdog-managed lease is renewed every third of it)", st.TTLMs)
	}
	if st.Mode != "" {
		line("mode", "%s", st.Mode)
	}
	readers := map[string]*int64{}
	for _, r := range st.Readers {
		readers[r.Owner] = r.RemainingMs
	}
	holders, queue := st.Holders, st.Queue
	if st.Semaphore != nil {
		st.Semaphore.print(line) // its holders and queue, with their permits
		holders, queue = nil, nil
	}
	for _, h := range holders {
		extra := ""
		if left, ok := readers[h.Owner]; ok {
			extra = "  reader " + remaining(left)
		}
		line("holder", "%s  count=%d%s", ownerText(h.Owner), h.Count, extra)
	}
	for _, r := range st.Readers {
		if !slices.ContainsFunc(st.Holders, func(h holder) bool { return h.Owner == r.Owner }) {
			line("reader", "%s  %s (no hold left in the hash)", ownerText(r.Owner), remaining(r.RemainingMs))
		}
	}
	for i, q := range queue {
		line("queue", "%d. %s  waiter %s", i+1, ownerText(q.Owner), remaining(q.RemainingMs))
	}
	for _, ww := range st.WaitingWriters {
		line("writer", "%s waiting  %s (blocks new readers)", ownerText(ww.Owner), remaining(ww.RemainingMs))
	}
	for _, g := range st.Gone {
		line("gone", "%s  gave up; recorded %s", ownerText(g.Owner), remaining(g.RemainingMs))
	}
	if st.Truncated {
		line("…", "lists cut by --max: %d holders, %d readers, %d queued, %d waiting writers, %d gone in all",
			st.Counts.Holders, st.Counts.Readers, st.Counts.Queue, st.Counts.WaitingWriters, st.Counts.Gone)
	}
	if st.Fence.LastToken > 0 {
		line("fence", "%d (%s, ttl %dms: the last token issued; the next grant's is greater)", st.Fence.LastToken, quote(st.Fence.Key), st.Fence.TTLMs)
	} else {
		line("fence", "none issued (%s does not exist)", quote(st.Fence.Key))
	}
	for _, k := range st.Keys {
		size := ""
		if k.Size >= 0 {
			size = " of " + strconv.FormatInt(k.Size, 10)
		}
		line("key", "%s  %s%s  ttl %s", quote(k.Key), k.Type, size, ttl(k.TTLMs))
	}
	if st.Wake.Subscribers != nil {
		line("wake-ups", "%s subscribed to %s", plural(*st.Wake.Subscribers, "client"), quote(st.Wake.Channel))
	}
}

// summary is the state on one line: who holds the lock, who waits.
func (st *lockState) summary() string {
	var b strings.Builder
	if !st.Held {
		b.WriteString("free")
	} else {
		b.WriteString("held")
		switch st.Mode {
		case "read":
			b.WriteString(" for reading")
		case "write":
			b.WriteString(" for writing")
		case "":
		default:
			b.WriteString(" in mode " + quote(st.Mode))
		}
		b.WriteString(" by ")
		owners := make([]string, 0, len(st.Holders))
		for _, h := range st.Holders {
			owners = append(owners, fmt.Sprintf("%s ×%d", ownerText(h.Owner), h.Count))
		}
		b.WriteString(listOf(owners, st.Counts.Holders))
	}
	if len(st.Queue) > 0 {
		owners := make([]string, 0, len(st.Queue))
		for _, q := range st.Queue {
			owners = append(owners, ownerText(q.Owner))
		}
		b.WriteString("; queue: " + listOf(owners, st.Counts.Queue))
	}
	if len(st.WaitingWriters) > 0 {
		owners := make([]string, 0, len(st.WaitingWriters))
		for _, q := range st.WaitingWriters {
			owners = append(owners, ownerText(q.Owner))
		}
		b.WriteString("; writers waiting: " + listOf(owners, st.Counts.WaitingWriters))
	}
	return b.String()
}

// listOf joins items, saying how many more of total there are.
func listOf(items []string, total int64) string {
	s := strings.Join(items, ", ")
	if more := total - int64(len(items)); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	if s == "" {
		s = "?"
	}
	return s
}

func remaining(ms *int64) string {
	switch {
	case ms == nil:
		return "no deadline recorded"
	case *ms <= 0:
		return fmt.Sprintf("deadline passed %dms ago (purged by the next script on the lock)", -*ms)
	default:
		return fmt.Sprintf("deadline in %dms", *ms)
	}
}

func ttl(ms int64) string {
	if ms == -1 {
		return "none"
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// quote returns s as it is when it prints plainly on one line, else Go-quoted.
func quote(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r == '"' || r == '\\' || r == ' ' || !strconv.IsGraphic(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

func plural(n int64, noun string) string {
	s := strconv.FormatInt(n, 10) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
