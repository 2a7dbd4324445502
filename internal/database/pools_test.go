package database

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakePool is a pool that records its closing; with hold set, Close waits for it
// to be closed (as a pool waits for the connections in use).
type fakePool struct {
	id     int
	closed atomic.Bool
	hold   chan struct{}
}

func (p *fakePool) Close() {
	if p.hold != nil {
		<-p.hold
	}
	p.closed.Store(true)
}

// opener counts the pools it makes and keeps what each was made with.
type opener struct {
	mu       sync.Mutex
	made     []*fakePool
	timeouts []Timeouts
	limits   []Limits
	fail     error
	hold     chan struct{}
}

func (o *opener) open(t Timeouts, l Limits) (*fakePool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail != nil {
		return nil, o.fail
	}
	p := &fakePool{id: len(o.made) + 1, hold: o.hold}
	o.made, o.timeouts, o.limits = append(o.made, p), append(o.timeouts, t), append(o.limits, l)
	return p, nil
}

func (o *opener) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.made)
}

func server() Server {
	return Server{Name: "pg", Engine: "postgres", Host: "db.example", Port: 5432, Username: "admin", Password: "s3cret"}
}

// A pool is kept while the server is unchanged, and replaced (the old one closed)
// when anything it was made with changes.
func TestPoolsReplaceAPoolWhenItsSettingsChange(t *testing.T) {
	for _, tc := range []struct {
		name        string
		change      func(*Server)
		wantReplace bool
	}{
		{name: "unchanged", change: func(*Server) {}},
		{name: "another password", change: func(s *Server) { s.Password = "new" }, wantReplace: true},
		{name: "another admin", change: func(s *Server) { s.Username = "root" }, wantReplace: true},
		{name: "another host", change: func(s *Server) { s.Host = "elsewhere.example" }, wantReplace: true},
		{name: "another port", change: func(s *Server) { s.Port = 5433 }, wantReplace: true},
		{name: "another sslMode", change: func(s *Server) { s.SSLMode = "require" }, wantReplace: true},
		{name: "a CA", change: func(s *Server) { s.CACert = []byte("pem") }, wantReplace: true},
		// prefer is what an empty sslMode means: the same connections.
		{name: "the default sslMode spelt out", change: func(s *Server) { s.SSLMode = "prefer" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k Pools[*fakePool]
			var o opener
			first, _, err := k.Get(server(), o.open)
			if err != nil {
				t.Fatal(err)
			}
			s := server()
			tc.change(&s)
			second, _, err := k.Get(s, o.open)
			if err != nil {
				t.Fatal(err)
			}
			k.Close()
			if replaced := first != second; replaced != tc.wantReplace {
				t.Fatalf("replaced = %v, want %v", replaced, tc.wantReplace)
			}
			if wantMade := map[bool]int{false: 1, true: 2}[tc.wantReplace]; o.count() != wantMade {
				t.Errorf("made %d pools, want %d", o.count(), wantMade)
			}
			if !first.closed.Load() || !second.closed.Load() {
				t.Error("Close left a pool open")
			}
		})
	}
}

// The timeouts and limits reach the pool with their defaults filled in, and a change
// of them makes a new pool.
func TestPoolsGiveTimeoutsAndLimitsWithDefaults(t *testing.T) {
	k := Pools[*fakePool]{Timeouts: Timeouts{Statement: time.Second}, Limits: Limits{MaxConns: 3}}
	var o opener
	_, got, err := k.Get(server(), o.open)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultTimeouts
	want.Statement = time.Second
	if got != want || o.timeouts[0] != want {
		t.Errorf("timeouts %+v (the pool's %+v), want %+v", got, o.timeouts[0], want)
	}
	if l := o.limits[0]; l.MaxConns != 3 || l.MaxIdle != DefaultLimits.MaxIdle {
		t.Errorf("limits %+v", l)
	}
	k.Timeouts.Lock = time.Second
	if _, _, err := k.Get(server(), o.open); err != nil {
		t.Fatal(err)
	}
	if o.count() != 2 {
		t.Errorf("new timeouts kept the pool made with the old ones")
	}
}

func TestTimeoutsAndLimitsWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want Timeouts
	}{
		{Timeouts{}, DefaultTimeouts},
		{Timeouts{Statement: -1, Grace: -1}, DefaultTimeouts},
		{Timeouts{Statement: time.Second, Lock: 2, Clone: 3, Grace: 4, Connect: 6, Init: 5}, Timeouts{Statement: time.Second, Lock: 2, Clone: 3, Grace: 4, Connect: 6, Init: 5}},
		{Timeouts{Init: time.Hour}, Timeouts{Statement: 30 * time.Second, Lock: 5 * time.Second, Clone: 10 * time.Minute, Grace: 2 * time.Second, Connect: 5 * time.Second, Init: time.Hour}},
	} {
		if got := tc.in.WithDefaults(); got != tc.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in, want Limits
	}{
		{Limits{}, DefaultLimits},
		{Limits{MaxConns: -2}, DefaultLimits},
		{Limits{MaxConns: 2, MaxIdle: time.Second}, Limits{MaxConns: 2, MaxIdle: time.Second}},
	} {
		if got := tc.in.WithDefaults(); got != tc.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// Each server has a pool of its own; Forget closes one server's and leaves the others.
func TestPoolsForgetOneServer(t *testing.T) {
	var k Pools[*fakePool]
	var o opener
	a := server()
	b := server()
	b.Name = "other"
	pa, _, _ := k.Get(a, o.open)
	pb, _, _ := k.Get(b, o.open)
	if pa == pb {
		t.Fatal("two servers share a pool")
	}
	k.Forget("pg")
	k.Forget("never-kept")
	again, _, _ := k.Get(a, o.open)
	if again == pa {
		t.Error("a forgotten server's pool was used again")
	}
	if same, _, _ := k.Get(b, o.open); same != pb {
		t.Error("Forget replaced another server's pool")
	}
	k.Close()
	if !pa.closed.Load() || !pb.closed.Load() || !again.closed.Load() {
		t.Error("a pool was left open")
	}
}

// Servers without a name (tests, tools) are kept by address and admin.
func TestPoolsKeepUnnamedServersByAddress(t *testing.T) {
	var k Pools[*fakePool]
	var o opener
	s := server()
	s.Name = ""
	p1, _, _ := k.Get(s, o.open)
	p2, _, _ := k.Get(s, o.open)
	s.Host = "elsewhere.example"
	p3, _, _ := k.Get(s, o.open)
	if p1 != p2 || p1 == p3 || p1.closed.Load() {
		t.Errorf("pools %d, %d, %d (first closed: %v)", p1.id, p2.id, p3.id, p1.closed.Load())
	}
	k.Close()
}

// A pool that could not be made is not kept: the next Get tries again.
func TestPoolsKeepNothingWhenOpenFails(t *testing.T) {
	var k Pools[*fakePool]
	o := opener{fail: errors.New("no")}
	if _, _, err := k.Get(server(), o.open); err == nil || err.Error() != "no" {
		t.Fatalf("err = %v", err)
	}
	o.fail = nil
	p, _, err := k.Get(server(), o.open)
	if err != nil || p == nil {
		t.Fatalf("after a failure: %v, %v", p, err)
	}
	k.Close()
}

// Replacing and forgetting do not wait for the old pool (whose Close waits for the
// connections in use); Close waits for all of them, and nothing is made after it.
func TestPoolsCloseWaitsForEveryPool(t *testing.T) {
	var k Pools[*fakePool]
	o := opener{hold: make(chan struct{})}
	old, _, _ := k.Get(server(), o.open)
	s := server()
	s.Password = "rotated"
	if _, _, err := k.Get(s, o.open); err != nil { // returns while old is still closing
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		k.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a pool was still closing")
	case <-time.After(50 * time.Millisecond):
	}
	close(o.hold)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if !old.closed.Load() {
		t.Error("the replaced pool is open")
	}
	if _, _, err := k.Get(server(), o.open); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	k.Close() // twice is harmless
}

// Reconciles of one server at once share one pool.
func TestPoolsMakeOnePoolForConcurrentCallers(t *testing.T) {
	var k Pools[*fakePool]
	var o opener
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, _, err := k.Get(server(), o.open); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if o.count() != 1 {
		t.Errorf("%d pools made", o.count())
	}
	k.Close()
}
