//go:build integration

package mysql

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// hangProxy forwards TCP connections to a server until hang is called; from then on
// it accepts connections and keeps every connection open, but nothing crosses it:
// a server that stopped answering, without stopping a process. (A SIGSTOPped server
// can be continued behind the test's back: job control sends SIGCONT to a stopped
// process whose process group becomes orphaned.)
type hangProxy struct {
	l      net.Listener
	target string
	hung   atomic.Bool
	done   chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

func startHangProxy(t *testing.T, target string) *hangProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{l: l, target: target, done: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// port is the proxy's port on 127.0.0.1.
func (p *hangProxy) port() int32 { return int32(p.l.Addr().(*net.TCPAddr).Port) }

// hang stops all traffic, on open connections and new ones.
func (p *hangProxy) hang() { p.hung.Store(true) }

func (p *hangProxy) keep(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *hangProxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.keep(in)
		if p.hung.Load() {
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.keep(out)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst until the proxy hangs; then it holds what it read.
func (p *hangProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.hung.Load() {
			<-p.done
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *hangProxy) close() {
	_ = p.l.Close()
	close(p.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
