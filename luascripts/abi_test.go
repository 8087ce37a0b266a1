package luascripts

import (
	"slices"
	"strings"
	"testing"
)

func TestNewKeys(t *testing.T) {
	for _, tc := range []struct {
		name, escaped string
	}{
		{"order:42", "order:42"},
		{"order:{42}", "order:%7B42%7D"},
		{"}", "%7D"},
		{"{", "%7B"},
		{"{}", "%7B%7D"},
		{"a{b}c", "a%7Bb%7Dc"},
		{"x}:fence", "x%7D:fence"},
		{"%", "%25"},
		{"%7B", "%257B"},
		{"100%", "100%25"},
		{"\x00\xff\n ", "\x00\xff\n "},
	} {
		if got := EscapeName(tc.name); got != tc.escaped {
			t.Errorf("EscapeName(%q) = %q, want %q", tc.name, got, tc.escaped)
		}
		base := "relock:{" + tc.escaped + "}"
		want := Keys{
			Lock:    base,
			Fence:   base + ":fence",
			Queue:   base + ":queue",
			Readers: base + ":readers",
			Gone:    base + ":gone",
			Wake:    base + ":wake",
		}
		got := NewKeys("relock", tc.name)
		if got.lists == nil || !slices.Equal(got.acquireKeys(), []string{want.Lock, want.Fence, want.Queue, want.Readers, want.Gone}) {
			t.Errorf("NewKeys(relock, %q): acquire keys %v", tc.name, got.acquireKeys())
		}
		got.lists = nil
		if got != want {
			t.Errorf("NewKeys(relock, %q) = %+v, want %+v", tc.name, got, want)
		}
		if got, ok := NameOf("relock", base); !ok || got != tc.name {
			t.Errorf("NameOf(relock, %q) = %q, %v; want %q, true", base, got, ok, tc.name)
		}
	}
}

// NameOf accepts exactly the lock keys NewKeys makes: inspect must not show
// another key (a fence, a user's own key, a non-canonical escape) as a lock.
func TestNameOfRejectsOtherKeys(t *testing.T) {
	for _, key := range []string{
		"",
		"relock",
		"relock:",
		"relock:{",
		"relock:{}",   // the empty name is not a lock name
		"relock:{a",   // no closing brace
		"relock:a}",   // no opening brace
		"relock:{a}:", // a suffix
		"relock:{a}:fence",
		"relock:{a}:queue",
		"relock:{a}:waiters",
		"relock:{a}:readers",
		"relock:{a}:gone",
		"relock:{a}:wake",
		"relock:{a}b}",   // a raw brace inside
		"relock:{a{b}",   // a raw brace inside
		"relock:{{a}}",   // raw braces inside
		"relock:{%7b}",   // lower-case escape: NewKeys writes %7B
		"relock:{%7d}",   // lower-case escape
		"relock:{%}",     // a bare escape byte
		"relock:{a%}",    // an escape cut short
		"relock:{%7}",    // an escape cut short
		"relock:{%41}",   // an escape of a byte NewKeys leaves alone
		"relock:{%2525}", // fine on its own, see below
		"relock:x:{a}",   // another prefix
		"other:{a}",
		"relockx:{a}",
		"Relock:{a}",
		"a:relock:{a}",
	} {
		name, ok := NameOf("relock", key)
		if key == "relock:{%2525}" {
			// The one canonical key in the list: the name "%25".
			if !ok || name != "%25" {
				t.Errorf("NameOf(relock, %q) = %q, %v; want %q, true", key, name, ok, "%25")
			}
			continue
		}
		if ok {
			t.Errorf("NameOf(relock, %q) = %q, true; want false (NewKeys gives %q for that name)", key, name, NewKeys("relock", name).Lock)
		}
	}
}

// hashTag returns what Redis Cluster hashes of key: the bytes between the
// first '{' and the first '}' after it when that is not empty, else key.
func hashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return key
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok || tag == "" {
		return key
	}
	return tag
}

// checkName asserts what the layout promises for one name.
func checkName(t *testing.T, prefix, name string) {
	t.Helper()
	k := NewKeys(prefix, name)
	e := EscapeName(name)
	if strings.ContainsAny(e, "{}") {
		t.Fatalf("EscapeName(%q) = %q holds a brace", name, e)
	}
	if got, ok := NameOf(prefix, k.Lock); !ok || got != name {
		t.Fatalf("NameOf(%q, %q) = %q, %v; want %q, true", prefix, k.Lock, got, ok, name)
	}
	for _, key := range []string{k.Fence, k.Queue, k.Readers, k.Gone, k.Wake} {
		if got, ok := NameOf(prefix, key); ok {
			t.Fatalf("NameOf(%q, %q) = %q, true; want false: not a lock key", prefix, key, got)
		}
	}
	for _, key := range []string{k.Lock, k.Fence, k.Queue, k.Readers, k.Gone, k.Wake} {
		if tag := hashTag(key); tag != e {
			t.Fatalf("key %q hashes %q, want the escaped name %q (one slot per lock)", key, tag, e)
		}
	}
}

func allKeys(k Keys) []string {
	return []string{k.Lock, k.Fence, k.Queue, k.Readers, k.Gone, k.Wake}
}

func TestDistinctNamesShareNoKey(t *testing.T) {
	names := []string{"}", "{", "{}", "a{b}c", "x}:fence", "x", "{iso}", "iso", "%7B", "%7b", "%", "%25", "a}:fence", "a"}
	owner := map[string]string{}
	for _, n := range names {
		checkName(t, "relock", n)
		for _, key := range allKeys(NewKeys("relock", n)) {
			if other, ok := owner[key]; ok {
				t.Errorf("names %q and %q share key %q", other, n, key)
			}
			owner[key] = n
		}
	}
}

func FuzzNames(f *testing.F) {
	for _, seed := range [][2]string{
		{"}", "{"},
		{"{}", "a{b}c"},
		{"x}:fence", "x"},
		{"{iso}", "iso"},
		{"%7B", "{"},
		{"%", "%25"},
		{"order:{42}", "order:%7B42%7D"},
		{"\x00\xff", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		// Read as the inside of a key, b names a lock only if it is exactly
		// how NewKeys writes that name.
		key := "relock:{" + b + "}"
		if n, ok := NameOf("relock", key); ok && NewKeys("relock", n).Lock != key {
			t.Fatalf("NameOf(relock, %q) = %q, true, but that name's lock key is %q", key, n, NewKeys("relock", n).Lock)
		}
		if a == "" {
			return // the empty name is invalid; the engine refuses it
		}
		checkName(t, "relock", a)
		if b == "" || a == b {
			return
		}
		checkName(t, "relock", b)
		ka, kb := allKeys(NewKeys("relock", a)), allKeys(NewKeys("relock", b))
		for _, x := range ka {
			for _, y := range kb {
				if x == y {
					t.Fatalf("names %q and %q share key %q", a, b, x)
				}
			}
		}
	})
}

// TestEvalTextCallsGlobals checks that a script run by EVAL calls the
// functions time.lua keeps in locals by their global names (evalGlobals):
// every local time.lua declares for them is spelled out in every script.
func TestEvalTextCallsGlobals(t *testing.T) {
	var locals []string
	for _, line := range strings.Split(file("time.lua"), "\n") {
		if !strings.HasPrefix(line, "local ") || strings.HasPrefix(line, "local function") || !strings.Contains(line, "_") {
			continue
		}
		for _, name := range strings.Split(strings.TrimPrefix(line, "local "), ",") {
			locals = append(locals, strings.TrimSpace(name))
		}
	}
	if !slices.Contains(locals, "redis_call") || !slices.Contains(locals, "string_format") {
		t.Fatalf("time.lua's locals not found: %v", locals)
	}
	for s := Script(1); s < numScripts; s++ {
		text := scripts[s].text
		for _, name := range locals {
			if strings.Contains(text, name+"(") {
				t.Errorf("%s: the EVAL text calls the local %s; add it to evalGlobals", scripts[s].name, name)
			}
		}
	}
}

// TestPackedCalls checks the wire form of the acquire and release calls:
// the lock's key alone and a few arguments (Redis grows a call's tables
// one element at a time), and that every acquire and release script
// unpacks them (wire.lua).
func TestPackedCalls(t *testing.T) {
	k := NewKeys("relock", "packed")
	a := AcquireCall(MutexAcquire, k, Acquire{Owner: "c:1", LeaseMs: "30000", Wait: true, WaiterMs: "5000", Publish: "spublish", Within: "c:0", First: true, Extra: []string{"2", "8"}})
	if !slices.Equal(a.Keys, []string{k.Lock}) || !slices.Equal(a.Args, []string{"c:1", "30000", "5000", "21sc:0", "2", "8"}) {
		t.Errorf("acquire call: KEYS %v ARGV %v", a.Keys, a.Args)
	}
	r := ReleaseCall(MutexRelease, k, "c:1", "publish", 1, "0")
	if !slices.Equal(r.Keys, []string{k.Lock}) || !slices.Equal(r.Args, []string{"c:1", "p1"}) {
		t.Errorf("release call: KEYS %v ARGV %v", r.Keys, r.Args)
	}
	r = ReleaseCall(MutexRelease, k, "c:1", "spublish", 0, "60000")
	if !slices.Equal(r.Args, []string{"c:1", "s0", "60000"}) {
		t.Errorf("release call that records a gone owner: ARGV %v", r.Args)
	}
	for s := Script(1); s < numScripts; s++ {
		l := scripts[s]
		want := plain
		switch {
		case strings.HasSuffix(l.name, "_acquire"):
			want = packedAcquire
		case strings.HasSuffix(l.name, "_release"):
			want = packedRelease
		}
		if l.wire != want || (want != plain) != slices.Contains(l.files, "wire.lua") {
			t.Errorf("%s: wire %d with files %v; an acquire or release script unpacks its call (wire.lua)", l.name, l.wire, l.files)
		}
	}
}

// TestPackedAcquireRefusesMoreExtra checks that an acquire call with more
// ARGV of a kind's own than wire.lua unpacks panics rather than dropping
// them.
func TestPackedAcquireRefusesMoreExtra(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("an acquire call with three ARGV of a kind's own did not panic")
		}
	}()
	AcquireCall(MutexAcquire, NewKeys("relock", "extra"), Acquire{Owner: "c:1", LeaseMs: "1", WaiterMs: "1", Extra: []string{"1", "2", "3"}})
}
