package main

import "github.com/relockgo/relock/internal/ownerid"

// labelOf returns the label an owner id carries (relock.WithOwnerLabel), or
// "".
func labelOf(owner string) string {
	label, _ := ownerid.Split(owner)
	return label
}

// ownerText is an owner as the text output shows it: the owner id, or, for
// one that carries a label, the id without it followed by the label in
// brackets.
func ownerText(owner string) string {
	label, rest := ownerid.Split(owner)
	if label == "" {
		return quote(owner)
	}
	return quote(rest) + " (" + quote(label) + ")"
}
