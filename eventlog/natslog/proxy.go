package natslog

import (
	"errors"
	"io"
	"net"
	"sync"
)

// routeProxy forwards TCP connections from its loopback port to target,
// and can cut them all and refuse new ones: a Cluster routes every link
// between two nodes through one, so a test can partition a node while it
// runs.
type routeProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startRouteProxy(target string) (*routeProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &routeProxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *routeProxy) addr() string { return p.ln.Addr().String() }

func (p *routeProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *routeProxy) forward(c net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	t, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(t) {
		return
	}
	defer p.drop(t)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done // one side ended: end both
	c.Close()
	t.Close()
	<-done
}

// track registers c unless the proxy is cut (then c is closed).
func (p *routeProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *routeProxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// setCut cuts every connection and refuses new ones, or lets them through
// again.
func (p *routeProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *routeProxy) close() error {
	err := p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
