package integration

import (
	"bufio"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// monitor records, through Redis's MONITOR, every command the server runs,
// in the server's own order: scripts' inner commands appear as calls from
// "lua". Tests replay it to check orders (FIFO grants, writer preference)
// that no client can observe without races.
type monitor struct {
	addr string
	conn net.Conn
	done chan struct{}
	end  chan struct{} // closed when the end marker is read

	mu   sync.Mutex
	cmds [][]string // guarded by mu: each command's words, e.g. ["lua", "rpush", key, owner]
}

var quoted = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// startMonitor starts recording the server at addr; stop ends it.
func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	m := &monitor{addr: addr, conn: conn, done: make(chan struct{}), end: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			// 1795317954.837897 [0 lua] "rpush" "key" "a"
			from := "client"
			if strings.Contains(line, " lua] ") {
				from = "lua"
			}
			words := []string{from}
			for _, q := range quoted.FindAllStringSubmatch(line, -1) {
				s, err := strconv.Unquote(`"` + q[1] + `"`)
				if err != nil {
					s = q[1]
				}
				words = append(words, s)
			}
			if len(words) == 3 && strings.EqualFold(words[1], "echo") && words[2] == endMarker {
				close(m.end)
				return
			}
			m.mu.Lock()
			m.cmds = append(m.cmds, words)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.conn.Close(); <-m.done })
	return m
}

const endMarker = "relock-monitor-end"

// stop ends the recording once the server's stream has caught up: it sends
// a marker and reads up to it.
func (m *monitor) stop(t *testing.T) {
	t.Helper()
	conn, err := net.Dial("tcp", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ECHO " + endMarker + "\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.end:
	case <-time.After(time.Minute):
		t.Fatal("MONITOR did not catch up")
	}
	m.conn.Close()
	<-m.done
}

// commands returns what was recorded.
func (m *monitor) commands() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmds
}
