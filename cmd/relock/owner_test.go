package main

import (
	"context"
	"strings"
	"testing"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
)

// inspect shows the label of an owner's Client beside its id, in the text
// and in the JSON, for holders and queued waiters alike.
func TestInspectShowsOwnerLabels(t *testing.T) {
	srv, rc := server(t)
	ctx := context.Background()
	name := t.Name()
	holderClient := locktest.Client(t, rc, relock.WithOwnerLabel("host-a:101"))
	waiterClient := locktest.Client(t, srv.Client(t), relock.WithOwnerLabel("host-b:202"))
	lease, err := fair.New(holderClient, name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if l, err := fair.New(waiterClient, name).Lock(wctx); err == nil {
			l.Unlock()
		}
	}()
	defer func() { cancel(); <-waited }()
	var st *jsonState
	locktest.Eventually(t, "the waiter to queue", func() bool {
		st, _ = inspectJSON(t, "--redis", srv.Addr(), name)
		return len(st.Queue) == 1
	})
	if len(st.Holders) != 1 || st.Holders[0].Label != "host-a:101" || !strings.HasPrefix(st.Holders[0].Owner, "host-a:101@") {
		t.Errorf("holders %+v, want one owner labelled host-a:101", st.Holders)
	}
	if st.Queue[0].Label != "host-b:202" || !strings.HasPrefix(st.Queue[0].Owner, "host-b:202@") {
		t.Errorf("queue %+v, want one owner labelled host-b:202", st.Queue)
	}

	code, stdout, _ := runCmd(t, "inspect", "--redis", srv.Addr(), name)
	if code != exitOK {
		t.Fatalf("exit status %d, want %d", code, exitOK)
	}
	holder := strings.TrimPrefix(st.Holders[0].Owner, "host-a:101@")
	waiter := strings.TrimPrefix(st.Queue[0].Owner, "host-b:202@")
	for _, want := range []string{
		"holder    " + holder + " (host-a:101)  count=1\n",
		"1. " + waiter + " (host-b:202)  waiter ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}
