// Package ownerid makes and reads the owner ids that relock writes in
// Redis. An owner id is "<client id>:<seq>": the client id is what comes
// before its last ':', a Client's UUID, or "<label>@<UUID>" for a Client
// made with a label (relock.WithOwnerLabel). Wake-up payloads are "owner"
// or "owner token", so an owner id never holds a space.
package ownerid

import (
	"strings"

	"github.com/google/uuid"
)

// MaxLabel is the most bytes of a label an owner id carries.
const MaxLabel = 64

// Sanitize returns label as owner ids carry it: without surrounding
// spaces, every rune but ASCII letters, digits and "._:/-" replaced with
// '_', cut to MaxLabel bytes. It reports false when nothing is left.
func Sanitize(label string) (string, bool) {
	label = strings.TrimSpace(label)
	if label == "" {
		return "", false
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune("._:/-", r):
			return r
		}
		return '_'
	}, label)
	if len(clean) > MaxLabel {
		clean = clean[:MaxLabel] // ASCII only: a byte is a rune
	}
	return clean, true
}

// NewClient returns a new client id, unique across Clients, carrying
// label (sanitized already) unless it is empty.
func NewClient(label string) string {
	if label == "" {
		return uuid.NewString()
	}
	return label + "@" + uuid.NewString()
}

// Split returns the label that owner carries, and owner without it; an
// owner without a label gives "" and owner.
func Split(owner string) (label, rest string) {
	client := owner
	if i := strings.LastIndexByte(owner, ':'); i >= 0 {
		client = owner[:i]
	}
	at := strings.LastIndexByte(client, '@')
	if at < 0 {
		return "", owner
	}
	return owner[:at], owner[at+1:]
}
