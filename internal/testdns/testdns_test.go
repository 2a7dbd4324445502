package testdns

import (
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
