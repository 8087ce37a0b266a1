package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/rwlock"
)

// listJSON runs list --json and returns the names listed, in order.
func listJSON(t *testing.T, args ...string) ([]string, []listEntry) {
	t.Helper()
	code, stdout, stderr := runCmd(t, append([]string{"list", "--json"}, args...)...)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	var out struct {
		Prefix  string      `json:"prefix"`
		Pattern string      `json:"pattern"`
		Locks   []listEntry `json:"locks"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode: %v\n%s", err, stdout)
	}
	if out.Locks == nil {
		t.Fatalf("locks is null, want a list")
	}
	names := []string{}
	for _, l := range out.Locks {
		names = append(names, l.Name)
	}
	return names, out.Locks
}

// TestListPattern checks that list matches its pattern against the names
// the users wrote, exactly, whatever bytes they hold: glob characters, the
// bytes the key escapes ('{', '}', '%') and the escape sequences
// themselves, under a prefix that holds glob characters too.
func TestListPattern(t *testing.T) {
	srv, rc := server(t)
	prefix := "t*[l]?\\" + t.Name()
	c := locktest.Client(t, rc, relock.WithKeyPrefix(prefix))
	// Keys of this prefix match the prefix taken as a glob: listed only if
	// the prefix is not escaped in MATCH and not checked after.
	other := locktest.Client(t, rc, relock.WithKeyPrefix("tZlQ"+t.Name()))
	ctx := context.Background()
	names := []string{"a*b", "a?b", "a[b]", "a{b}", "a}b", "a%7Bb", "a%b", "axb", `a\b`, "ab", "b", "a b", "a\nb"}
	for _, name := range names {
		if _, err := mutex.New(c, name, relock.WithLease(time.Minute)).TryLock(ctx); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if _, err := mutex.New(other, name, relock.WithLease(time.Minute)).TryLock(ctx); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
	}
	for _, tc := range []struct {
		pattern string
		want    []string // sorted
	}{
		{"*", []string{"a\nb", "a b", "a%7Bb", "a%b", "a*b", "a?b", "a[b]", `a\b`, "ab", "axb", "a{b}", "a}b", "b"}},
		{`a\*b`, []string{"a*b"}},
		{`a\?b`, []string{"a?b"}},
		{"a?b", []string{"a\nb", "a b", "a%b", "a*b", "a?b", `a\b`, "axb", "a}b"}},
		{"a{*", []string{"a{b}"}},
		{"a%7B*", []string{"a%7Bb"}},
		{"a%*", []string{"a%7Bb", "a%b"}},
		{"a[[]*", []string{"a[b]"}},
		{"a[{}]*", []string{"a{b}", "a}b"}},
		{"*}", []string{"a{b}"}},
		{`a\\b`, []string{`a\b`}},
		{"a[^a-z]b", []string{"a\nb", "a b", "a%b", "a*b", "a?b", `a\b`, "a}b"}},
		{"b", []string{"b"}},
		{"nothing*", []string{}},
	} {
		got, locks := listJSON(t, "--redis", srv.Addr(), "--prefix", prefix, "--", tc.pattern)
		if !slices.Equal(got, tc.want) {
			t.Errorf("pattern %q: listed %q, want %q", tc.pattern, got, tc.want)
		}
		for _, l := range locks {
			if l.Key != luascripts.NewKeys(prefix, l.Name).Lock || !l.Held || l.Kind != kindMutex || l.TTLMs <= 0 || l.Counts.Holders != 1 || l.LastToken == 0 {
				t.Errorf("pattern %q: %+v, want a held mutex with its key, TTL and token", tc.pattern, l)
			}
		}
	}

	// Text: one line per lock, names that do not print plainly quoted.
	code, text, _ := runCmd(t, "list", "--redis", srv.Addr(), "--prefix", prefix, "a?b")
	for _, want := range []string{"NAME ", "\"a\\nb\"  ", "\"a b\"  ", "a*b  ", "mutex", "held"} {
		if code != exitOK || !strings.Contains(text, want) {
			t.Errorf("text output lacks %q", want)
		}
	}

	// A free lock is listed with --all only, by the keys it left.
	if _, err := mutex.New(c, "a*b").ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := listJSON(t, "--redis", srv.Addr(), "--prefix", prefix, `a\*b`); len(got) != 0 {
		t.Errorf("a free lock is listed without --all: %q", got)
	}
	got, locks := listJSON(t, "--redis", srv.Addr(), "--prefix", prefix, "--all", `a\*b`)
	if !slices.Equal(got, []string{"a*b"}) || locks[0].Held || locks[0].LastToken == 0 {
		t.Errorf("--all: %+v, want a*b free with its last token", locks)
	}
}

// TestListKinds checks the kind and mode that list shows.
func TestListKinds(t *testing.T) {
	srv, rc := server(t)
	prefix := t.Name()
	c := locktest.Client(t, rc, relock.WithKeyPrefix(prefix))
	ctx := context.Background()
	m, err := mutex.New(c, "m").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	r, err := rwlock.New(c, "rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock()
	names, locks := listJSON(t, "--redis", srv.Addr(), "--prefix", prefix)
	if !slices.Equal(names, []string{"m", "rw"}) {
		t.Fatalf("listed %q, want m and rw", names)
	}
	if locks[0].Kind != kindMutex || locks[1].Kind != kindRWLock || locks[1].Mode != "read" || locks[1].Counts.Holders != 1 || locks[1].Counts.Readers != 1 {
		t.Errorf("locks %+v, want a mutex and a read-held rwlock with one reader", locks)
	}
	code, text, _ := runCmd(t, "list", "--redis", srv.Addr(), "--prefix", prefix, "zz*")
	if code != exitOK || text != "no locks\n" {
		t.Errorf("no match: exit status %d, output %q", code, text)
	}
}

// TestGlobMatchAgreesWithRedis checks globMatch against Redis's own MATCH
// on the same names and patterns: list promises Redis's glob rules.
func TestGlobMatchAgreesWithRedis(t *testing.T) {
	_, rc := server(t)
	ctx := context.Background()
	base := "glob:" + t.Name() + ":"
	names := []string{"", "a", "b", "ab", "abc", "a*c", "a?c", "a[c", "a]c", "a\\c", "a-c", "a^c", "A", "z", "aXc", "a\nc", "é"}
	for _, n := range names {
		if err := rc.Do(ctx, rc.B().Set().Key(base+n).Value("x").Px(time.Minute).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	patterns := []string{
		"*", "a*", "*c", "a?c", "a??", "?", "[ab]", "[^ab]", "[a-c]*", "[c-a]*", "a[]]c", "a[\\]]c", "a[^]]c",
		"a\\*c", "a\\?c", "a\\[c", "a[", "a[c", "a[-]c", "a[a-]c", "a\\", "a\\\\c", "a[\\-x]c", "**c", "a*b*c",
		"[^a]*", "\\a*", "*[", "a[x-z^]c", "[", "é", "?\xa9",
	}
	for _, p := range patterns {
		var fromRedis []string
		var cursor uint64
		for {
			e, err := rc.Do(ctx, rc.B().Scan().Cursor(cursor).Match(globEscape(base)+p).Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range e.Elements {
				fromRedis = append(fromRedis, strings.TrimPrefix(k, base))
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
		var ours []string
		for _, n := range names {
			if globMatch(p, n) {
				ours = append(ours, n)
			}
		}
		slices.Sort(fromRedis)
		fromRedis = slices.Compact(fromRedis)
		slices.Sort(ours)
		if !slices.Equal(ours, fromRedis) {
			t.Errorf("pattern %q: globMatch matches %q, Redis %q", p, ours, fromRedis)
		}
	}
}

func TestLiteralHead(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"", ""}, {"abc", "abc"}, {"ab*c", "ab"}, {"a?b", "a"}, {"a[b]", "a"},
		{`a\*b*`, "a*b"}, {`a\`, `a\`}, {`\\x`, `\x`}, {"{x}*", "{x}"},
	} {
		if got := literalHead(tc.pattern); got != tc.want {
			t.Errorf("literalHead(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}
