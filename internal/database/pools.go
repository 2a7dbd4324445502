package database

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Timeouts bound the work on a server, the same for both engines. Zero fields take
// DefaultTimeouts.
type Timeouts struct {
	// Statement bounds each statement on the server: PostgreSQL's statement_timeout,
	// MariaDB's max_statement_time (MySQL has no server-side limit for anything but
	// SELECT). Orderly gives up waiting for an answer a little later (Grace), so that
	// a server that stopped answering holds a worker no longer. Default 30 s.
	Statement time.Duration
	// Lock is how long a statement waits for a lock another session holds:
	// PostgreSQL's lock_timeout, MySQL's lock_wait_timeout and
	// innodb_lock_wait_timeout (which count whole seconds; less is rounded up to
	// 1 s). Default 5 s.
	Lock time.Duration
	// Clone bounds copying a template: PostgreSQL's CREATE DATABASE ... TEMPLATE,
	// MySQL's copy of the template's tables. Default 10 min.
	Clone time.Duration
	// Grace is how much longer than the server's own timeout Orderly waits for an
	// answer. Default 2 s.
	Grace time.Duration
	// Connect is how long connecting (TCP, TLS and the login) may take. Default 5 s.
	Connect time.Duration
	// Init is the time a DevDatabase's init SQL may run: its session's
	// statement_timeout (max_statement_time on MariaDB), and how long its
	// transaction may take in all; Orderly gives up (and on MySQL kills the
	// session) at Init plus Grace. Default 1 min.
	Init time.Duration
}

// DefaultTimeouts are the timeouts of a connector that sets none.
var DefaultTimeouts = Timeouts{Statement: 30 * time.Second, Lock: 5 * time.Second, Clone: 10 * time.Minute, Grace: 2 * time.Second, Connect: 5 * time.Second, Init: time.Minute}

// WithDefaults is t with DefaultTimeouts in its zero (or negative) fields.
func (t Timeouts) WithDefaults() Timeouts {
	orDefault := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	orDefault(&t.Statement, DefaultTimeouts.Statement)
	orDefault(&t.Lock, DefaultTimeouts.Lock)
	orDefault(&t.Clone, DefaultTimeouts.Clone)
	orDefault(&t.Grace, DefaultTimeouts.Grace)
	orDefault(&t.Connect, DefaultTimeouts.Connect)
	orDefault(&t.Init, DefaultTimeouts.Init)
	return t
}

// Deadline bounds waiting for the answers to n statements of the usual kind.
func (t Timeouts) Deadline(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(n)*t.Statement+t.Grace)
}

// Limits bound what Orderly keeps open on each server, the same for both engines.
// Zero fields take DefaultLimits.
type Limits struct {
	// MaxConns bounds the connections of each server's pool. Default 8.
	MaxConns int
	// MaxIdle is how long a pooled connection may stay unused before it is closed.
	// Default 1 min.
	MaxIdle time.Duration
}

// DefaultLimits are the limits of a connector that sets none.
var DefaultLimits = Limits{MaxConns: 8, MaxIdle: time.Minute}

// WithDefaults is l with DefaultLimits in its zero (or negative) fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultLimits.MaxConns
	}
	if l.MaxIdle <= 0 {
		l.MaxIdle = DefaultLimits.MaxIdle
	}
	return l
}

// Pool is what Pools keeps for a server: an engine's connection pool.
type Pool interface {
	// Close closes the pool's connections; it may wait for those in use.
	Close()
}

// ErrClosed is returned by Pools.Get after Close.
var ErrClosed = errors.New("the database connector is closed")

// Pools keeps one pool per DatabaseServer for an engine's Connector: every engine
// embeds one, so that keeping, replacing and closing pools works the same way on
// every engine. A pool is replaced (and the old one closed) when what it was made
// with changes (the server's host, port, sslMode, CA or admin credentials, or the
// timeouts and limits), so that no connections made with old credentials linger on
// the server. The zero value is ready to use; Timeouts and Limits are read when a
// pool is made.
type Pools[P Pool] struct {
	// Timeouts bound every statement; zero fields take DefaultTimeouts.
	Timeouts Timeouts
	// Limits bound each pool; zero fields take DefaultLimits.
	Limits Limits

	mu    sync.Mutex
	pools map[string]kept[P]
	// closed is set by Close: no pool is made after it.
	closed bool
	// closing counts the pools being closed in the background, which Close waits for.
	closing sync.WaitGroup
}

// kept is one server's pool and a digest of the settings it was made with (a digest,
// so that the kept settings hold no password).
type kept[P Pool] struct {
	pool     P
	settings [sha256.Size]byte
}

// Get returns the pool kept for s, and the timeouts its engine works with. Without a
// pool for s, or with one made with other settings (which is closed), it makes one
// with open, which is given the timeouts and limits with their defaults filled in.
// Pools make no connection when they are made, so open is called with the lock held:
// two reconciles of one server never make two pools.
func (k *Pools[P]) Get(s Server, open func(Timeouts, Limits) (P, error)) (P, Timeouts, error) {
	t, l := k.Timeouts.WithDefaults(), k.Limits.WithDefaults()
	key := s.Name
	if key == "" {
		key = s.Engine + "|" + net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))) + "|" + s.Username
	}
	want := settings(s, t, l)
	k.mu.Lock()
	defer k.mu.Unlock()
	var none P
	if k.closed {
		return none, t, ErrClosed
	}
	if p, ok := k.pools[key]; ok {
		if p.settings == want {
			return p.pool, t, nil
		}
		delete(k.pools, key)
		k.closeLater(p.pool)
	}
	p, err := open(t, l)
	if err != nil {
		return none, t, err
	}
	if k.pools == nil {
		k.pools = map[string]kept[P]{}
	}
	k.pools[key] = kept[P]{pool: p, settings: want}
	return p, t, nil
}

// Forget closes the pool of the server called name, if there is one.
func (k *Pools[P]) Forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.pools[name]; ok {
		delete(k.pools, name)
		k.closeLater(p.pool)
	}
}

// Close closes every pool, those replaced or forgotten before included, and returns
// once all their connections are closed (a connection in use is closed when it is
// returned). Get fails afterwards. Closing twice is harmless.
func (k *Pools[P]) Close() {
	k.mu.Lock()
	k.closed = true
	for _, p := range k.pools {
		k.closeLater(p.pool)
	}
	k.pools = nil
	k.mu.Unlock()
	k.closing.Wait()
}

// closeLater closes p without waiting: a pool's Close blocks until the connections
// in use are returned, and a reconcile still using the old pool must not hold up
// the caller. Called with k.mu held, so that Close, which sets closed under the same
// lock, waits for every pool closed before it.
func (k *Pools[P]) closeLater(p P) { k.closing.Go(p.Close) }

// settings digests what a pool for s is made with.
func settings(s Server, t Timeouts, l Limits) [sha256.Size]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%q %q %d %q %q %q %x %v %v",
		s.Engine, s.Host, s.Port, s.EffectiveSSLMode(), s.Username, s.Password, s.CACert, t, l))
}
