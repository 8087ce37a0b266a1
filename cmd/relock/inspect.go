package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
)

// inspectConfig is the inspect subcommand's command line.
type inspectConfig struct {
	redis   string
	prefix  string
	timeout time.Duration
}

func inspectFlags(stderr io.Writer) (*flag.FlagSet, *inspectConfig) {
	cfg := &inspectConfig{}
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.redis, "redis", "", "`host:port` of the Redis server (required)")
	fs.StringVar(&cfg.prefix, "prefix", relock.DefaultKeyPrefix, "key prefix the locking Clients were given with relock.WithKeyPrefix")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "give up when Redis has not answered after this long")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: relock inspect --redis host:port [--prefix relock] NAME

Prints the state of lock NAME, of any kind, without taking it: whether it is
held and by which owner (a mutex's string holds its owner id; the hash of a
reentrant, fair or read-write lock maps owner ids to hold counts), its
remaining time to live, the last fencing token issued, and the Clients
subscribed to its wake-ups.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, cfg
}

// runInspect runs the inspect subcommand.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, cfg := inspectFlags(stderr)
	names, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(names) != 1 {
		fmt.Fprintf(stderr, "relock inspect: want one lock NAME, got %d arguments\n\n", len(names))
		fs.Usage()
		return exitUsage
	}
	name := names[0]
	switch {
	case cfg.redis == "":
		fmt.Fprintf(stderr, "relock inspect: --redis is required: inspect reads a real server\n\n")
		fs.Usage()
		return exitUsage
	case cfg.prefix == "" || strings.ContainsAny(cfg.prefix, "{}"):
		fmt.Fprintf(stderr, "relock inspect: --prefix %q: must be non-empty and hold no '{' or '}'\n", cfg.prefix)
		return exitUsage
	case name == "" || strings.ContainsAny(name, "{}"):
		fmt.Fprintf(stderr, "relock inspect: lock name %q: must be non-empty and hold no '{' or '}'\n", name)
		return exitUsage
	case cfg.timeout <= 0:
		fmt.Fprintf(stderr, "relock inspect: --timeout %v: must be positive\n", cfg.timeout)
		return exitUsage
	}

	rc, err := newRedis(cfg.redis, false)
	if err != nil {
		fmt.Fprintf(stderr, "relock inspect: connect to %s: %v\n", cfg.redis, err)
		return exitFail
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	st, err := readLockState(ctx, rc, kind.NewKeys(cfg.prefix, name))
	if err != nil {
		fmt.Fprintf(stderr, "relock inspect: %s: %v\n", name, err)
		return exitFail
	}
	st.print(stdout)
	return exitOK
}

// parseInterspersed parses fs from args, allowing flags after positional
// arguments (relock inspect demo --redis …), and returns the positional
// arguments. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// lockState is what Redis holds for one lock, read in one transaction.
type lockState struct {
	keys      kind.Keys
	typ       string            // TYPE of the lock key: "none" when free
	owner     string            // typ "string": the mutex's owner id
	fields    map[string]string // typ "hash": owner id → hold count
	pttl      int64             // PTTL of the lock key
	fence     int64             // last token issued; 0: none
	others    []companion       // the lock's other keys that exist
	listeners int64             // Clients subscribed to the wake-up channel; -1: unknown
}

// companion is one of a lock's other keys: a fair lock's queue, a
// read-write lock's readers.
type companion struct {
	key, typ string
	size     int64 // elements; -1: unknown
}

// readLockState reads the lock keys in one MULTI/EXEC, so that the holder,
// its TTL and the fence belong to one moment, then counts the wake-up
// subscribers.
func readLockState(ctx context.Context, rc rueidis.Client, k kind.Keys) (*lockState, error) {
	others := []string{k.Queue, k.Waiters, k.Readers}
	cmds := rueidis.Commands{
		rc.B().Multi().Build(),
		rc.B().Type().Key(k.Lock).Build(),
		rc.B().Pttl().Key(k.Lock).Build(),
		rc.B().Get().Key(k.Lock).Build(),     // WRONGTYPE unless a string
		rc.B().Hgetall().Key(k.Lock).Build(), // WRONGTYPE unless a hash
		rc.B().Get().Key(k.Fence).Build(),
	}
	for _, key := range others {
		cmds = append(cmds, rc.B().Type().Key(key).Build())
	}
	cmds = append(cmds, rc.B().Exec().Build())
	res := rc.DoMulti(ctx, cmds...)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return nil, err
		}
	}
	replies, err := res[len(res)-1].ToArray()
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	if len(replies) != len(cmds)-2 {
		return nil, fmt.Errorf("exec: %d replies to %d commands", len(replies), len(cmds)-2)
	}

	st := &lockState{keys: k, listeners: -1}
	if st.typ, err = replies[0].ToString(); err != nil {
		return nil, fmt.Errorf("type: %w", err)
	}
	if st.pttl, err = replies[1].AsInt64(); err != nil {
		return nil, fmt.Errorf("pttl: %w", err)
	}
	switch st.typ {
	case "string":
		if st.owner, err = replies[2].ToString(); err != nil {
			return nil, fmt.Errorf("get: %w", err)
		}
	case "hash":
		if st.fields, err = replies[3].AsStrMap(); err != nil {
			return nil, fmt.Errorf("hgetall: %w", err)
		}
	}
	if st.fence, err = replies[4].AsInt64(); err != nil && !rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("get %s: %w", k.Fence, err)
	}
	for i, key := range others {
		typ, err := replies[5+i].ToString()
		if err != nil {
			return nil, fmt.Errorf("type %s: %w", key, err)
		}
		if typ != "none" {
			st.others = append(st.others, companion{key: key, typ: typ, size: size(ctx, rc, key, typ)})
		}
	}
	st.listeners = subscribers(ctx, rc, k.Wake)
	return st, nil
}

// size returns the number of elements of key, of type typ, or -1 when
// unknown.
func size(ctx context.Context, rc rueidis.Client, key, typ string) int64 {
	var cmd rueidis.Completed
	switch typ {
	case "list":
		cmd = rc.B().Llen().Key(key).Build()
	case "zset":
		cmd = rc.B().Zcard().Key(key).Build()
	case "hash":
		cmd = rc.B().Hlen().Key(key).Build()
	case "set":
		cmd = rc.B().Scard().Key(key).Build()
	default:
		return -1
	}
	n, err := rc.Do(ctx, cmd).AsInt64()
	if err != nil {
		return -1
	}
	return n
}

// subscribers returns the number of clients subscribed to channel: one per
// relock Client with a waiter on the lock. It returns -1 when the server
// does not tell.
func subscribers(ctx context.Context, rc rueidis.Client, channel string) int64 {
	cmd := rc.B().PubsubNumsub().Channel(channel).Build()
	if rc.Mode() == rueidis.ClientModeCluster {
		cmd = rc.B().PubsubShardnumsub().Channel(channel).Build()
	}
	msg, err := rc.Do(ctx, cmd).ToMessage()
	if err != nil {
		return -1
	}
	// RESP2 and RESP3 both answer [channel, count].
	if m, err := msg.AsMap(); err == nil {
		if v, ok := m[channel]; ok {
			if n, err := v.AsInt64(); err == nil {
				return n
			}
		}
	}
	if a, err := msg.ToArray(); err == nil && len(a) == 2 {
		if n, err := a[1].AsInt64(); err == nil {
			return n
		}
	}
	return -1
}

// print writes the state as aligned "label  value" lines.
func (st *lockState) print(w io.Writer) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-9s %s\n", label, fmt.Sprintf(format, args...))
	}
	line("lock", "%s", st.keys.Lock)
	switch st.typ {
	case "none":
		line("state", "free")
	case "string":
		line("state", "held (a string: mutex)")
		line("owner", "%s", st.owner)
	case "hash":
		line("state", "held (a hash of owner id → hold count: reentrant, fair or read-write lock), %d field(s)", len(st.fields))
		ids := make([]string, 0, len(st.fields))
		for id := range st.fields {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			line("owner", "%s  count=%s", id, st.fields[id])
		}
	default:
		line("state", "unexpected: the key is a %s, which no relock lock uses", st.typ)
	}
	switch {
	case st.typ == "none":
	case st.pttl == -1:
		line("pttl", "none: the key never expires (not set by relock?)")
	case st.pttl >= 0:
		line("pttl", "%dms (lease left; the watchdog renews a held lease every third of it)", st.pttl)
	}
	if st.fence > 0 {
		line("fence", "%d (%s: the last token issued; the next grant's is greater)", st.fence, st.keys.Fence)
	} else {
		line("fence", "none issued (%s does not exist)", st.keys.Fence)
	}
	for _, o := range st.others {
		if o.size >= 0 {
			line("also", "%s (%s of %d)", o.key, o.typ, o.size)
		} else {
			line("also", "%s (%s)", o.key, o.typ)
		}
	}
	if st.listeners >= 0 {
		line("wake-ups", "%s subscribed to %s", plural(st.listeners, "client"), st.keys.Wake)
	}
}

func plural(n int64, noun string) string {
	s := strconv.FormatInt(n, 10) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
