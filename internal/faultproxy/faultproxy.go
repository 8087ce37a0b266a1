// Package faultproxy is an in-process TCP proxy that injects network faults
// between a client and a server, for tests: added latency, a blackhole that
// keeps connections open but forwards nothing, a stall of one connection,
// dropping every connection at once, and refusing connections outright (a
// server that is down, without the server going down).
//
// A blackhole or a stall holds the bytes it receives (up to the socket
// buffers and one pending chunk per direction) and delivers them, in order,
// when healed, as TCP does after a partition that ends before its
// retransmission timeout. Latency delays each chunk by the latency in force
// when it is written, so lowering it releases held chunks early; order is
// always kept.
//
// The proxy only ever dials the target it was given; it is meant for
// loopback addresses.
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// chunkSize bounds one read: small enough that latency applies per command
// rather than per burst of a busy pipeline.
const chunkSize = 32 << 10

// Proxy forwards connections accepted on its address to a target address.
// A zero Proxy is not usable: call Start. Its methods are safe for
// concurrent use.
type Proxy struct {
	addr   string
	target string
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	mu        sync.Mutex
	ln        net.Listener       // guarded by mu: nil while refusing
	latency   time.Duration      // guarded by mu
	blackhole bool               // guarded by mu: nothing is forwarded on any link
	links     map[*link]struct{} // guarded by mu: open links
	order     []*link            // guarded by mu: open links in accept order
	changed   chan struct{}      // guarded by mu: closed and replaced on every change of the fields above
	closed    bool               // guarded by mu
}

// link is one proxied connection: client side and server side.
type link struct {
	client, server net.Conn
	stalled        bool // guarded by Proxy.mu
	closeOnce      sync.Once
}

func (l *link) close() {
	l.closeOnce.Do(func() {
		l.client.Close()
		l.server.Close()
	})
}

// Start listens on a free 127.0.0.1 port and forwards every connection to
// target. It fails when it cannot listen.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		addr:    ln.Addr().String(),
		ln:      ln,
		target:  target,
		done:    make(chan struct{}),
		links:   map[*link]struct{}{},
		changed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr returns the address clients connect to. It stays the same across
// Refuse and Reopen.
func (p *Proxy) Addr() string { return p.addr }

// Refuse stops listening and closes every open connection: dials to Addr
// are refused (ECONNREFUSED) until Reopen, as they are by a host whose
// server is down. Refusing a refusing proxy does nothing.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.DropAll()
}

// Reopen listens on Addr again after Refuse. It fails when the proxy is
// closed or the port was taken meanwhile; reopening an open proxy does
// nothing.
func (p *Proxy) Reopen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// SetLatency delays every chunk forwarded from now on, in both directions,
// by d after it was read (0: no delay).
func (p *Proxy) SetLatency(d time.Duration) {
	p.update(func() { p.latency = d })
}

// Blackhole stops forwarding on every connection, open or accepted later,
// until Heal. Connections stay open and new ones are accepted.
func (p *Proxy) Blackhole() {
	p.update(func() { p.blackhole = true })
}

// Stall stops forwarding on the i-th open connection (in accept order,
// from 0) until Heal, and reports whether there was one.
func (p *Proxy) Stall(i int) bool {
	ok := false
	p.update(func() {
		if i >= 0 && i < len(p.order) {
			p.order[i].stalled = true
			ok = true
		}
	})
	return ok
}

// Heal ends the latency, the blackhole and every stall: the bytes held are
// delivered in order.
func (p *Proxy) Heal() {
	p.update(func() {
		p.latency, p.blackhole = 0, false
		for l := range p.links {
			l.stalled = false
		}
	})
}

// DropAll closes every open connection, both sides, and returns how many
// there were. Bytes held are lost. New connections are accepted as usual.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	links := p.order
	p.order = nil
	clear(p.links)
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Links returns the number of open connections. Each costs the proxy five
// goroutines.
func (p *Proxy) Links() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	p.DropAll()
	p.wg.Wait()
	return err
}

// update applies change under mu and wakes the forwarders waiting on the
// previous state.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
}

// accept serves ln until it is closed (by Refuse or Close).
func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close() // the target is down: the client sees a refused-like close
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.links[l] = struct{}{}
		p.order = append(p.order, l)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(l)
		}()
	}
}

// serve forwards both directions of l until either side ends, then closes
// both and forgets l.
func (p *Proxy) serve(l *link) {
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(l, l.client, l.server) })
	wg.Go(func() { p.pipe(l, l.server, l.client) })
	wg.Wait()
	p.mu.Lock()
	if _, ok := p.links[l]; ok {
		delete(p.links, l)
		for i, o := range p.order {
			if o == l {
				p.order = append(p.order[:i:i], p.order[i+1:]...)
				break
			}
		}
	}
	p.mu.Unlock()
}

type chunk struct {
	b    []byte
	read time.Time
}

// pipe copies src to dst through a queue so that a held chunk does not
// stop reading (up to the queue's size, then TCP pushes back). It closes
// the link when either end fails.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	defer l.close()
	queue := make(chan chunk, 64)
	go func() {
		defer close(queue)
		for {
			b := make([]byte, chunkSize)
			n, err := src.Read(b)
			if n > 0 {
				select {
				case queue <- chunk{b[:n], time.Now()}:
				case <-p.done:
					return
				}
			}
			if err != nil {
				// EOF or an error: either way the link is over, both sides.
				l.close()
				return
			}
		}
	}()
	for c := range queue {
		if !p.hold(l, c.read) {
			l.close()
			for range queue {
			}
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			l.close()
			for range queue {
			}
			return
		}
	}
}

// hold waits until a chunk read at read may be forwarded on l: no
// blackhole, no stall, its latency passed. It reports false when the proxy
// closed or l was dropped meanwhile.
func (p *Proxy) hold(l *link, read time.Time) bool {
	for {
		p.mu.Lock()
		_, open := p.links[l]
		blocked := p.blackhole || l.stalled
		due := read.Add(p.latency)
		changed := p.changed
		p.mu.Unlock()
		if !open {
			return false
		}
		var (
			t     *time.Timer
			timer <-chan time.Time
		)
		if !blocked {
			wait := time.Until(due)
			if wait <= 0 {
				return true
			}
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case <-timer: // due: check the state again before forwarding
		case <-changed:
		case <-p.done:
			stop(t)
			return false
		}
		stop(t)
	}
}

func stop(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}
