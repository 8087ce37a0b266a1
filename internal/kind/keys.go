package kind

import "strings"

// Keys are the Redis names of one lock. They share the hash tag {E}, where E
// is the lock's name escaped (see EscapeName), so a lock lives in one
// cluster slot whatever its name holds.
type Keys struct {
	Lock    string // the lock itself: string (mutex) or hash of owner → holds
	Fence   string // the last fencing token issued
	Queue   string // fair: waiters in arrival order
	Waiters string // fair: waiter deadlines; rwlock: waiting writers' deadlines
	Readers string // rwlock: reader deadlines
	Gone    string // owners whose acquire may still land after they gave up
	Wake    string // the wake-up channel
}

// NewKeys returns the keys of lock name under prefix. The prefix must hold
// no brace (relock.WithKeyPrefix checks it).
func NewKeys(prefix, name string) Keys {
	base := prefix + ":{" + EscapeName(name) + "}"
	return Keys{
		Lock:    base,
		Fence:   base + ":fence",
		Queue:   base + ":queue",
		Waiters: base + ":waiters",
		Readers: base + ":readers",
		Gone:    base + ":gone",
		Wake:    base + ":wake",
	}
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
