package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/luascripts"
)

const (
	// scanCount is SCAN's COUNT hint: keys looked at per call.
	scanCount = 1000
	// readBatch is how many locks list reads in one round trip.
	readBatch = 100
)

// companionSuffixes end a lock's keys other than the lock key itself (see
// luascripts.NewKeys); list --all finds free locks by them.
var companionSuffixes = []string{":fence", ":queue", ":readers", ":gone"}

const listHelp = `Usage: relock list --redis host:port [--prefix relock] [--all] [--json] [PATTERN]

Lists the locks under the key prefix whose name matches PATTERN (default *),
sorted by name, with their kind, TTL, holders and waiters. It walks the
keyspace with SCAN (never KEYS, which blocks the server), on every node of a
cluster; a lock taken or released during the walk may or may not be listed.

PATTERN is a glob on the lock NAME, not on the key, with Redis's rules: *
matches any bytes, ? one byte, [abc], [^abc] and [a-z] one byte of a set,
and \ makes the next byte literal (quote PATTERN in the shell). Names are
matched as the locks' users wrote them, whatever bytes they hold: the key
escapes '%', '{' and '}', and list undoes that before matching.

By default only held locks are listed (their lock key exists); --all also
lists free locks that left keys behind: a fence, a queue, deadlines.

--json prints {"prefix", "pattern", "locks": [...]}, each lock with fields
  name, key, held, kind, kind_candidates, mode, ttl_ms,
  counts {holders, readers, queue, waiting_writers, gone}, last_token,
  permits (a semaphore's {size, used, available}; null for other kinds)
as in inspect's output (see 'relock help inspect'); locks is [] when none.
`

// listConfig is list's own command line.
type listConfig struct {
	all bool
}

func listCommand(stdout, stderr io.Writer) (*command, *listConfig) {
	c := newCommand("list", listHelp, stdout, stderr)
	c.addRedisFlags(true)
	cfg := &listConfig{}
	c.fs.BoolVar(&cfg.all, "all", false, "also list free locks that left keys (fence, queue, deadlines)")
	return c, cfg
}

// listEntry is one lock in list's output.
type listEntry struct {
	Name           string   `json:"name"`
	Key            string   `json:"key"`
	Held           bool     `json:"held"`
	Kind           string   `json:"kind"`
	KindCandidates []string `json:"kind_candidates"`
	Mode           string   `json:"mode"`
	TTLMs          int64    `json:"ttl_ms"`
	Counts         counts   `json:"counts"`
	LastToken      int64    `json:"last_token"`
	Permits        *permits `json:"permits"` // a semaphore's; null for other kinds
}

type listOutput struct {
	Prefix  string      `json:"prefix"`
	Pattern string      `json:"pattern"`
	Locks   []listEntry `json:"locks"`
}

// runList runs the list subcommand.
func runList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, cfg := listCommand(stdout, stderr)
	pos, code := cmd.parse(args, 0, 1)
	if code != proceed {
		return code
	}
	pattern := "*"
	if len(pos) == 1 {
		pattern = pos[0]
	}
	return cmd.do(ctx, func(ctx context.Context, rc rueidis.Client) error {
		names, err := scanNames(ctx, cmd, rc, pattern, cfg.all)
		if err != nil {
			return err
		}
		locks, err := readEntries(ctx, cmd, rc, names, cfg.all)
		if err != nil {
			return err
		}
		if cmd.json {
			return writeJSON(stdout, listOutput{Prefix: cmd.prefix, Pattern: pattern, Locks: locks})
		}
		printList(stdout, locks)
		return nil
	})
}

// scanNames returns, sorted, the names of the locks under prefix that
// match pattern, found by SCAN on every node: the held ones (their lock key
// exists) or, with all set, also those of which only other keys exist.
//
// MATCH narrows the scan to the keys that start with the pattern's literal
// head; the pattern itself is matched against each name client-side, after
// unescaping, since a glob on names does not translate to one on escaped
// keys ("[{]" would have to match "%7B").
func scanNames(ctx context.Context, cmd *command, rc rueidis.Client, pattern string, all bool) ([]string, error) {
	prefix := cmd.prefix
	match := globEscape(prefix+":{"+luascripts.EscapeName(literalHead(pattern))) + "*"
	if !all {
		match += "}" // lock keys only: the others end with ":fence" and so on
	}
	nodes := map[string]rueidis.Client{"": rc}
	if rc.Mode() == rueidis.ClientModeCluster {
		// Each node holds its slots' keys. Replicas repeat their master's
		// keys; the set below drops the repeats.
		nodes = rc.Nodes()
	}
	found := map[string]bool{}
	for addr, node := range nodes {
		var cursor uint64
		for {
			sctx, cancel := cmd.bound(ctx)
			entry, err := node.Do(sctx, node.B().Scan().Cursor(cursor).Match(match).Count(scanCount).Build()).AsScanEntry()
			cancel()
			if err != nil {
				if addr != "" {
					return nil, fmt.Errorf("scan %s: %w", addr, err)
				}
				return nil, fmt.Errorf("scan: %w", err)
			}
			for _, key := range entry.Elements {
				if name, ok := lockNameOf(prefix, key, all); ok && globMatch(pattern, name) {
					found[name] = true
				}
			}
			if cursor = entry.Cursor; cursor == 0 {
				break
			}
		}
	}
	names := make([]string, 0, len(found))
	for name := range found {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// lockNameOf returns the name of the lock that key belongs to: its lock
// key, or with companions set any of its keys.
func lockNameOf(prefix, key string, companions bool) (string, bool) {
	if name, ok := luascripts.NameOf(prefix, key); ok {
		return name, true
	}
	if !companions {
		return "", false
	}
	for _, suffix := range companionSuffixes {
		if lockKey, ok := strings.CutSuffix(key, suffix); ok {
			return luascripts.NameOf(prefix, lockKey)
		}
	}
	return "", false
}

// readEntries reads the locks names under cmd's prefix, readBatch per
// round trip, leaving out those released since the scan unless all is set.
func readEntries(ctx context.Context, cmd *command, rc rueidis.Client, names []string, all bool) ([]listEntry, error) {
	prefix := cmd.prefix
	entries := []listEntry{}
	for len(names) > 0 {
		batch := names[:min(readBatch, len(names))]
		names = names[len(batch):]
		execs := make([]rueidis.LuaExec, len(batch))
		keys := make([]luascripts.Keys, len(batch))
		for i, name := range batch {
			keys[i] = luascripts.NewKeys(prefix, name)
			// Sizes only: list shows counts, not owners.
			execs[i] = rueidis.LuaExec{Keys: inspectKeys(keys[i]), Args: []string{"0"}}
		}
		bctx, cancel := cmd.bound(ctx)
		results := inspectScript.ExecMulti(bctx, rc, execs...)
		cancel()
		for i, res := range results {
			raw, err := parseRaw(res)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", quote(batch[i]), err)
			}
			st := interpret(prefix, batch[i], keys[i], raw)
			if !st.Held && !all {
				continue
			}
			if !st.Held && len(st.Keys) == 0 {
				continue // every key went away since the scan
			}
			entries = append(entries, listEntry{
				Name:           st.Name,
				Key:            st.Key,
				Held:           st.Held,
				Kind:           st.Kind,
				KindCandidates: st.KindCandidates,
				Mode:           st.Mode,
				TTLMs:          st.TTLMs,
				Counts:         st.Counts,
				LastToken:      st.Fence.LastToken,
				Permits:        listPermits(st),
			})
		}
	}
	return entries, nil
}

func printList(w io.Writer, locks []listEntry) {
	if len(locks) == 0 {
		fmt.Fprintln(w, "no locks")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tTTL\tHOLDERS\tWAITING")
	for _, l := range locks {
		k := l.Kind
		if k == "" {
			k = strings.Join(l.KindCandidates, "|")
		}
		if k == "" {
			k = "?"
		}
		state, ttlText := "free", "-"
		if l.Held {
			state, ttlText = "held", ttl(l.TTLMs)
			if l.Mode != "" {
				state += " (" + l.Mode + ")"
			}
			if l.Permits != nil {
				state += fmt.Sprintf(" (%d/%d permits)", l.Permits.Used, l.Permits.Size)
			}
		}
		var waiting []string
		if n := l.Counts.Queue; n > 0 {
			waiting = append(waiting, strconv.FormatInt(n, 10)+" queued")
		}
		if n := l.Counts.WaitingWriters; n > 0 {
			waiting = append(waiting, plural(n, "writer"))
		}
		if len(waiting) == 0 {
			waiting = append(waiting, "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", quote(l.Name), k, state, ttlText, l.Counts.Holders, strings.Join(waiting, ", "))
	}
	tw.Flush()
}

// literalHead returns the bytes that every name matching the glob pattern
// starts with: pattern up to its first unescaped *, ? or [, unescaped.
func literalHead(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*', '?', '[':
			return b.String()
		case '\\':
			if i+1 < len(pattern) {
				i++
			}
			b.WriteByte(pattern[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// globEscape returns a glob that matches s literally.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// globMatch reports whether s matches the glob pattern, with the rules of
// Redis's MATCH and KEYS (stringmatchlen in Redis's util.c), on bytes: *
// any bytes, ? one byte, [set] one byte of a set (^ negates, a-z is a
// range, \ escapes, an unclosed set ends with the pattern), \x the byte x.
func globMatch(pattern, s string) bool {
	// A mismatch after a * retries with that * taking one more byte; only
	// the last * need be retried, since it can take whatever an earlier
	// one would have.
	p, i := 0, 0
	star, starI := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			if pattern[p] == '*' {
				star, starI = p, i
				p++
				continue
			}
			if n, ok := matchOne(pattern[p:], s[i]); ok {
				p += n
				i++
				continue
			}
		}
		if star < 0 {
			return false
		}
		starI++
		p, i = star+1, starI
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches c against the token that starts pattern (not a *), and
// returns the token's length and whether c matches it.
func matchOne(pattern string, c byte) (int, bool) {
	switch pattern[0] {
	case '?':
		return 1, true
	case '\\':
		if len(pattern) >= 2 {
			return 2, pattern[1] == c
		}
		return 1, c == '\\'
	case '[':
		return matchSet(pattern, c)
	default:
		return 1, pattern[0] == c
	}
}

// matchSet matches c against the set that starts pattern with '['.
func matchSet(pattern string, c byte) (int, bool) {
	i := 1
	negate := i < len(pattern) && pattern[i] == '^'
	if negate {
		i++
	}
	match := false
	for ; i < len(pattern); i++ {
		switch {
		case pattern[i] == '\\' && i+1 < len(pattern):
			i++
			match = match || pattern[i] == c
		case pattern[i] == ']':
			return i + 1, match != negate
		case i+2 < len(pattern) && pattern[i+1] == '-':
			lo, hi := pattern[i], pattern[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (lo <= c && c <= hi)
			i += 2
		default:
			match = match || pattern[i] == c
		}
	}
	return len(pattern), match != negate // unclosed: the set ends with the pattern
}
