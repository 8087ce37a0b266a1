// Package integration holds relock's end-to-end tests: several OS processes
// (the test binary re-executed as a child) contending for locks on a real
// Redis, and faults made by killing, pausing and restarting real processes
// and servers. It has no non-test code.
package integration
