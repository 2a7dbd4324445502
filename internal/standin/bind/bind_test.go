package bind

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// TestStartServesSignedUpdates starts named and checks that the zone takes a signed
// update and answers for it, and refuses one signed with a wrong key.
func TestStartServesSignedUpdates(t *testing.T) {
	s, err := Start("int.example.test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rr, err := dns.NewRR("web.int.example.test. 60 IN A 192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(m *dns.Msg) { m.Insert([]dns.RR{rr}) }); err != nil {
		t.Fatalf("signed update: %v\n%s", err, s.Log())
	}
	got, err := s.Query("web.int.example.test", dns.TypeA)
	if err != nil || len(got) != 1 || got[0] != "192.0.2.7" {
		t.Fatalf("A web.int.example.test = %v, %v; want [192.0.2.7]", got, err)
	}
	good := s.KeySecret
	s.KeySecret = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	if err := s.Update(func(m *dns.Msg) { m.RemoveRRset([]dns.RR{rr}) }); err == nil {
		t.Fatal("an update signed with a wrong key was accepted")
	}
	s.KeySecret = good
	if got, _ := s.Query("web.int.example.test", dns.TypeA); len(got) != 1 {
		t.Fatalf("the refused update changed the zone: A = %v", got)
	}
}

// TestRunPersistent: a server run in a directory of its own is found again by the
// next Run (same key, same process), and its records survive a restart.
func TestRunPersistent(t *testing.T) {
	dir := t.TempDir()
	o := Options{Zones: []string{"int.example.test"}, Dir: dir}
	s, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rr, _ := dns.NewRR("web.int.example.test. 60 IN A 192.0.2.8")
	if err := s.Update(func(m *dns.Msg) { m.Insert([]dns.RR{rr}) }); err != nil {
		t.Fatal(err)
	}
	again, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pid() != s.Pid() || again.KeySecret != s.KeySecret || again.Addr != s.Addr {
		t.Fatalf("a second Run started another server: pid %d/%d, addr %s/%s", again.Pid(), s.Pid(), again.Addr, s.Addr)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	o.Port = portOf(t, s.Addr)
	restarted, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	if restarted.KeySecret != s.KeySecret {
		t.Error("the key changed across a restart")
	}
	if got, err := restarted.Query("web.int.example.test", dns.TypeA); err != nil || len(got) != 1 {
		t.Fatalf("after a restart A = %v, %v; want the record written before", got, err)
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(addr, "127.0.0.1:%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}
