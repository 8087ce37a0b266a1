package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/luascripts"
)

// Why watch read the lock's state: the reason printed with each line.
const (
	triggerStart     = "start"     // the first read
	triggerWake      = "wake"      // a message on the wake-up channel
	triggerSubscribe = "subscribe" // the (re)subscription was confirmed: messages may have been missed
	triggerPoll      = "poll"      // --poll passed without a wake-up
)

const watchHelp = `Usage: relock watch --redis host:port [--prefix relock] [--for 0] [--poll 1s] [--json] NAME

Prints a line each time lock NAME's holders, hold counts, mode, queue
or waiting writers change, until interrupted (Ctrl-C) or --for has passed.
It subscribes to the lock's wake-up channel (SSUBSCRIBE in cluster mode)
and pattern-subscribes to its clients' channels (NAME's channel followed by
':' and a client id), so a release, a hand-over or a force-unlock shows at
once; in cluster mode, where the clients' channels are sharded and sharded
pub/sub has no patterns, a hand-over shows at the next --poll. It also
reads the lock every --poll, since an acquisition or an expiry publishes
nothing. It takes no lock; it counts as one subscriber of the lock's
channel in inspect's output.

Each text line is: local time, why it read (start, wake, subscribe, poll),
and the state as inspect's "state" line says it.

--json prints one object per line: {"time" (RFC 3339, local clock),
"trigger", "state" (inspect's JSON object, see 'relock help inspect')}.
`

// watchConfig is watch's own command line.
type watchConfig struct {
	duration time.Duration // --for: 0 until interrupted
	poll     time.Duration
}

func watchCommand(stdout, stderr io.Writer) (*command, *watchConfig) {
	c := newCommand("watch", watchHelp, stdout, stderr)
	c.addRedisFlags(true)
	cfg := &watchConfig{}
	c.fs.DurationVar(&cfg.duration, "for", 0, "stop after this long (0: until interrupted)")
	c.fs.DurationVar(&cfg.poll, "poll", time.Second, "read the lock at least this often, wake-ups or not")
	return c, cfg
}

type watchLine struct {
	Time    string     `json:"time"`
	Trigger string     `json:"trigger"`
	State   *lockState `json:"state"`
}

// runWatch runs the watch subcommand. It ends with exitOK when ctx ends or
// --for passes, and exitFail only when it cannot connect: read errors are
// printed and the watch goes on.
func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, cfg := watchCommand(stdout, stderr)
	names, code := cmd.parse(args, 1, 1)
	if code != proceed {
		return code
	}
	switch {
	case cfg.duration < 0:
		return cmd.usageError("--for %v: must not be negative", cfg.duration)
	case cfg.poll <= 0:
		return cmd.usageError("--poll %v: must be positive", cfg.poll)
	}
	rc := cmd.connect()
	if rc == nil {
		return exitFail
	}
	defer rc.Close()
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	w := &watcher{cmd: cmd, rc: rc, name: names[0], poll: cfg.poll, kick: make(chan struct{}, 1)}
	w.run(ctx)
	return exitOK
}

// watcher is one run of watch.
type watcher struct {
	cmd  *command
	rc   rueidis.Client
	name string
	poll time.Duration

	// kick asks for a read; its buffer of one coalesces a burst of
	// wake-ups into one read.
	kick    chan struct{}
	mu      sync.Mutex // guards pending
	pending string     // the reason for the read kick asks for: the latest
}

// run prints the state, then each change of it, until ctx ends.
func (w *watcher) run(ctx context.Context) {
	k := luascripts.NewKeys(w.cmd.prefix, w.name)
	// The lock's channel, and its clients' channels, on which hand-overs
	// (but in cluster mode, where they are sharded) and loss notices go.
	lock := w.rc.B().Subscribe().Channel(k.Wake).Build()
	if w.rc.Mode() == rueidis.ClientModeCluster {
		lock = w.rc.B().Ssubscribe().Channel(k.Wake).Build()
	}
	clients := k.Wake + ":*"
	cmds := []rueidis.Completed{lock, w.rc.B().Psubscribe().Pattern(globEscape(k.Wake) + ":*").Build()}
	names := []string{k.Wake, clients}
	var wg sync.WaitGroup
	subscribed := make([]chan struct{}, len(cmds))
	for i, cmd := range cmds {
		subscribed[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.subscribe(ctx, cmd, names[i], subscribed[i])
		}()
	}
	// The subscriptions are up before the first read, so that no change
	// after that read goes unseen; a subscription slow to confirm only
	// delays the start by --timeout, as polling sees changes anyway.
	t := time.NewTimer(w.cmd.timeout)
confirm:
	for i, ch := range subscribed {
		select {
		case <-ch:
		case <-t.C:
			fmt.Fprintf(w.cmd.stderr, "relock watch: the subscription to %s was not confirmed within %v; polling every %v\n", quote(names[i]), w.cmd.timeout, w.poll)
			break confirm
		case <-ctx.Done():
			break confirm
		}
	}
	t.Stop()

	last := ""
	trigger := triggerStart
	w.takeKick() // the first read comes after the confirmation
	ticker := time.NewTicker(w.poll)
	defer ticker.Stop()
	for ctx.Err() == nil {
		if st := w.read(ctx); st != nil {
			if sig := st.Kind + "|" + st.summary(); sig != last {
				last = sig
				w.print(trigger, st)
			}
		}
		select {
		case <-ctx.Done():
		case <-w.kick:
			trigger = w.takeKick()
		case <-ticker.C:
			trigger = triggerPoll
		}
	}
	wg.Wait()
}

// read reads the state, bounded by --timeout, or prints why it could not
// and returns nil.
func (w *watcher) read(ctx context.Context) *lockState {
	rctx, cancel := context.WithTimeout(ctx, w.cmd.timeout)
	defer cancel()
	st, err := readLockState(rctx, w.rc, w.cmd.prefix, w.name, defaultMax)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(w.cmd.stderr, "relock watch: %s: %v\n", quote(w.name), err)
		}
		return nil
	}
	return st
}

func (w *watcher) print(trigger string, st *lockState) {
	now := time.Now()
	if w.cmd.json {
		b, err := json.Marshal(watchLine{Time: now.Format(time.RFC3339Nano), Trigger: trigger, State: st})
		if err == nil {
			fmt.Fprintf(w.cmd.stdout, "%s\n", b)
		}
		return
	}
	what := st.summary()
	switch {
	case st.Kind != "":
		what = st.Kind + " " + what
	case st.Held && len(st.KindCandidates) > 0:
		what = strings.Join(st.KindCandidates, "|") + " " + what
	}
	fmt.Fprintf(w.cmd.stdout, "%s  %-9s %s\n", now.Format("15:04:05.000"), trigger, what)
}

// subscribe listens with cmd, a subscription to channel (a pattern for
// psubscribe), until ctx ends, kicking a read on every message and every
// subscription confirmation (a resubscription after a reconnect may follow
// missed messages). It closes subscribed at the first confirmation. When
// the subscription fails, it says so and tries again after --poll or a
// second, whichever is shorter; polling goes on.
func (w *watcher) subscribe(ctx context.Context, cmd rueidis.Completed, channel string, subscribed chan struct{}) {
	var once sync.Once
	hctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "subscribe" || s.Kind == "ssubscribe" || s.Kind == "psubscribe" {
			// Kick first: run takes the first confirmation's kick before
			// its first read, which that confirmation makes redundant.
			w.kickWith(triggerSubscribe)
			once.Do(func() { close(subscribed) })
		}
	})
	for {
		err := w.rc.Receive(hctx, cmd.Pin(), func(rueidis.PubSubMessage) { w.kickWith(triggerWake) })
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("unsubscribed")
		}
		retry := min(w.poll, time.Second)
		fmt.Fprintf(w.cmd.stderr, "relock watch: subscription to %s: %v; retrying in %v\n", quote(channel), err, retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// kickWith asks for a read for trigger; a read already asked for and not
// begun takes trigger as its reason, since it will see its change.
func (w *watcher) kickWith(trigger string) {
	w.mu.Lock()
	w.pending = trigger
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// takeKick returns the reason for the read asked for, and clears the ask.
func (w *watcher) takeKick() string {
	select {
	case <-w.kick:
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending
}
