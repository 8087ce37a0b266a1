package ownerid

import (
	"strings"
	"testing"
)

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"web-1:4242":             "web-1:4242",
		"  host.example/a ":      "host.example/a",
		"a b@c\td":               "a_b_c_d",
		"héllo":                  "h_llo",
		strings.Repeat("x", 100): strings.Repeat("x", MaxLabel),
	} {
		got, ok := Sanitize(in)
		if !ok || got != want {
			t.Errorf("Sanitize(%q) = %q, %v; want %q, true", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "   ", "\t\n"} {
		if got, ok := Sanitize(in); ok {
			t.Errorf("Sanitize(%q) = %q, true; want false", in, got)
		}
	}
}

func TestSplit(t *testing.T) {
	id := NewClient("web-1:4242")
	owner := id + ":7"
	label, rest := Split(owner)
	if label != "web-1:4242" || rest+"" != strings.TrimPrefix(owner, "web-1:4242@") {
		t.Errorf("Split(%q) = %q, %q", owner, label, rest)
	}
	if i := strings.LastIndexByte(owner, ':'); owner[:i] != id {
		t.Errorf("the client id of %q is not %q", owner, id)
	}
	plain := NewClient("") + ":3"
	if label, rest := Split(plain); label != "" || rest != plain {
		t.Errorf("Split(%q) = %q, %q; want no label", plain, label, rest)
	}
	if strings.ContainsRune(owner, ' ') {
		t.Errorf("owner id %q holds a space", owner)
	}
}
