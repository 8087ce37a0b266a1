//go:build !linux

package main

import "os/exec"

// ownedChild leaves cmd in this process's group, so that Ctrl-C reaches it
// too: without PR_SET_PDEATHSIG that is what stops it if this process dies.
func ownedChild(cmd *exec.Cmd, ownGroup bool) {}
