// Command relock shows relock's locks at work and looks into their state in
// Redis.
//
// Usage:
//
//	relock demo [flags]                  run workers contending on one mutex, redlock or semaphore
//	relock inspect [flags] NAME          print the state of lock NAME, of any kind
//	relock list [flags] [PATTERN]        list the locks under a key prefix
//	relock unlock --force [flags] NAME   delete lock NAME whoever holds it
//	relock watch [flags] NAME            print lock NAME's holder changes as they happen
//	relock help [COMMAND]                print this help, or a command's
//
// The demo starts an embedded Redis (miniredis) unless --redis names a server,
// and runs several workers that each lock a relock mutex a few times. It
// prints every acquisition and release, and checks what the lock promises:
// no two workers hold it at once (mutual exclusion), every grant carries a
// fencing token greater than the one before, and waiters are woken by the
// release instead of polling. It also shows TryLock failing with
// relock.ErrNotAcquired while the lock is held, and a second Lock of the mutex
// in the holder's call chain failing with relock.ErrWouldDeadlock. With
// --kind semaphore the workers share a semaphore's permits instead, and
// the demo checks that no more hold them than there are permits. It exits
// 1 on any violation or error.
//
// Inspect, list and watch read a real server without taking or changing any
// lock: inspect reads all of a lock's keys in one read-only script, so what
// it prints belongs to one moment, and computes every deadline from the
// server's clock. Unlock --force is the one command that writes.
//
// Help goes to standard output; a usage error prints to standard error.
// Exit status: 0 on success, 1 when the demo found a violation or a command
// failed, 2 for a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // a violation, or Redis or the lock failed
	exitUsage = 2 // bad command line

	proceed = -1 // command.parse: not an exit status; the command goes on
)

const usage = `relock shows relock's distributed locks at work and inspects their state.

Usage:

  relock demo [--kind mutex|redlock|semaphore] [--redis host:port] [--workers 4] [--rounds 3] [--hold 50ms] ...
      Run workers contending on one relock mutex and check mutual exclusion,
      fencing tokens and wake-ups. Without --redis it runs on an embedded
      Redis (miniredis).

  relock inspect --redis host:port [--prefix relock] [--json] NAME
      Print the state of lock NAME, of any kind: its kind, holders and hold
      counts, a read-write lock's mode, readers and waiting writers with
      their deadlines, the waiters' queue in order, the fence, TTLs and the
      clients subscribed to its wake-ups.

  relock list --redis host:port [--prefix relock] [--all] [--json] [PATTERN]
      List the locks whose name matches the glob PATTERN (default *), with
      kind, TTL and holders. Uses SCAN, never KEYS.

  relock unlock --force --redis host:port [--prefix relock] NAME
      Delete lock NAME whoever holds it, of any kind, and wake its waiters.

  relock watch --redis host:port [--prefix relock] [--for 0] [--json] NAME
      Print a line each time lock NAME's holders, mode or waiters change,
      woken by the lock's wake-up channel, until interrupted.

  relock help [COMMAND]
      Print this help, or a command's flags and output format.

Every command but demo needs --redis; --prefix is the key prefix the locking
Clients were given (relock.WithKeyPrefix), --timeout bounds each step that
talks to Redis (one read of a lock, one SCAN call, the unlock).
Exit status: 0 success, 1 failure, 2 usage error.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name), writing to
// stdout and stderr, and returns the exit status. The end of ctx (an
// interrupt) stops the work in progress, which then ends cleanly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The demo's workers and the Client's logger write concurrently; one
	// lock for both streams keeps lines whole and in order on a terminal.
	var mu sync.Mutex
	stdout = &lockedWriter{mu: &mu, w: stdout}
	stderr = &lockedWriter{mu: &mu, w: stderr}

	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "inspect":
		return runInspect(ctx, rest, stdout, stderr)
	case "list":
		return runList(ctx, rest, stdout, stderr)
	case "unlock":
		return runUnlock(ctx, rest, stdout, stderr)
	case "watch":
		return runWatch(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "relock: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

// runHelp prints the usage, or a command's help, to stdout.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	var cmd *command
	if len(args) == 1 {
		switch args[0] {
		case "demo":
			cmd, _ = demoCommand(stdout, stderr)
		case "inspect":
			cmd, _ = inspectCommand(stdout, stderr)
		case "list":
			cmd, _ = listCommand(stdout, stderr)
		case "unlock":
			cmd, _ = unlockCommand(stdout, stderr)
		case "watch":
			cmd, _ = watchCommand(stdout, stderr)
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "relock help: unknown topic %q\n\n%s", strings.Join(args, " "), usage)
		return exitUsage
	}
	cmd.printHelp(stdout)
	return exitOK
}

// command is one subcommand's command line: its flags, help and the flags
// that all commands reading Redis share.
type command struct {
	name           string
	help           string // printed before the flags
	fs             *flag.FlagSet
	stdout, stderr io.Writer

	// Shared by the commands that read Redis (see addRedisFlags).
	hasRedis bool // addRedisFlags was called
	redis    string
	prefix   string
	timeout  time.Duration
	json     bool
}

// newCommand returns the command name with help. The flag package prints
// its parse errors to stderr; help goes to stdout (see parse).
func newCommand(name, help string, stdout, stderr io.Writer) *command {
	c := &command{name: name, help: help, stdout: stdout, stderr: stderr}
	c.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	c.fs.SetOutput(stderr)
	c.fs.Usage = func() {} // parse prints the help where it belongs
	return c
}

// addRedisFlags adds --redis, --prefix, --timeout and, with json set,
// --json.
func (c *command) addRedisFlags(json bool) {
	c.hasRedis = true
	c.fs.StringVar(&c.redis, "redis", "", "`host:port` of the Redis server, standalone or any node of a cluster (required)")
	c.fs.StringVar(&c.prefix, "prefix", relock.DefaultKeyPrefix, "key prefix the locking Clients were given with relock.WithKeyPrefix")
	c.fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "give up when Redis has not answered a step (a read, a SCAN call) after this long")
	if json {
		c.fs.BoolVar(&c.json, "json", false, "print JSON (see the field list above) instead of text")
	}
}

func (c *command) printHelp(w io.Writer) {
	fmt.Fprint(w, c.help)
	fmt.Fprint(w, "\nFlags:\n")
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(c.stderr)
}

// usageError prints a usage error and returns exitUsage.
func (c *command) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "relock %s: %s\n", c.name, fmt.Sprintf(format, args...))
	fmt.Fprintf(c.stderr, "Run 'relock help %s' for usage.\n", c.name)
	return exitUsage
}

// parse parses args, allowing flags after positional arguments (relock
// inspect NAME --redis …), and returns the positional ones, of which there
// must be between minPos and maxPos. It checks the Redis flags when the
// command has them. It returns an exit status ≥ 0 when the command must
// stop: exitOK after printing the help (-h), exitUsage after an error;
// otherwise proceed.
func (c *command) parse(args []string, minPos, maxPos int) ([]string, int) {
	pos, err := parseInterspersed(c.fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(c.stdout)
		return nil, exitOK
	case err != nil:
		// The flag package printed the error.
		fmt.Fprintf(c.stderr, "Run 'relock help %s' for usage.\n", c.name)
		return nil, exitUsage
	case len(pos) < minPos || len(pos) > maxPos:
		if maxPos == 0 {
			return nil, c.usageError("unexpected argument %q", pos[0])
		}
		return nil, c.usageError("want %s, got %d arguments", argsWanted(c.name), len(pos))
	}
	if !c.hasRedis {
		return pos, proceed
	}
	switch {
	case c.redis == "":
		return nil, c.usageError("--redis is required: %s reads a real server", c.name)
	case c.prefix == "" || strings.ContainsAny(c.prefix, "{}"):
		return nil, c.usageError("--prefix %q: must be non-empty and hold no '{' or '}'", c.prefix)
	case c.timeout <= 0:
		return nil, c.usageError("--timeout %v: must be positive", c.timeout)
	}
	for _, name := range pos {
		if name == "" && c.name != "list" {
			return nil, c.usageError("the lock name must not be empty")
		}
	}
	return pos, proceed
}

func argsWanted(cmd string) string {
	if cmd == "list" {
		return "at most one PATTERN"
	}
	return "one lock NAME"
}

// parseInterspersed parses fs from args, allowing flags after positional
// arguments, and returns the positional arguments. Everything after "--" is
// positional, so a lock named "-x" is "relock inspect -- -x".
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

// connect returns a client of the server at c.redis, or prints why not and
// returns nil. The caller must Close it.
func (c *command) connect() rueidis.Client {
	rc, err := newRedis(c.redis, false)
	if err != nil {
		fmt.Fprintf(c.stderr, "relock %s: connect to %s: %v\n", c.name, c.redis, err)
		return nil
	}
	return rc
}

// bound returns ctx bounded by --timeout, for one step.
func (c *command) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// do connects to Redis and runs f, which bounds its steps with c.bound,
// and returns the exit status: exitFail, after printing the error, when
// connecting or f failed.
func (c *command) do(ctx context.Context, f func(ctx context.Context, rc rueidis.Client) error) int {
	rc := c.connect()
	if rc == nil {
		return exitFail
	}
	defer rc.Close()
	if err := f(ctx, rc); err != nil {
		fmt.Fprintf(c.stderr, "relock %s: %v\n", c.name, err)
		return exitFail
	}
	return exitOK
}

// lockedWriter serializes writes to w under mu, which several lockedWriters
// may share.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
