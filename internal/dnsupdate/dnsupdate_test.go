package dnsupdate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"orderly.dev/orderly/internal/dnsupdate"
	"orderly.dev/orderly/internal/testing/testdns"
)

// TestAgainstBIND writes, reads back, replaces and deletes a record in a real named,
// and checks that the prerequisites make the server refuse a stale update.
func TestAgainstBIND(t *testing.T) {
	s, err := testdns.Start("int.example.test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := &dnsupdate.Client{Server: s.Addr, Key: dnsupdate.Key{Name: testdns.KeyName, Algorithm: testdns.KeyAlgorithm, Secret: s.KeySecret}}
	d := dnsupdate.Desired{Zone: s.Zone, Host: "web.int.example.test", Owner: dnsupdate.OwnerValue("shop", "web"), Values: []string{"192.0.2.1"}, TTL: 60}
	owner := dnsupdate.OwnerName(d.Host)

	o, err := c.Observe(ctx, d.Host, owner)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := dnsupdate.Plan(d, o); a != dnsupdate.Create {
		t.Fatalf("plan on an empty name = %s", a)
	}
	m, _ := dnsupdate.UpdateFor(dnsupdate.Create, d)
	if err := c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The same create again: its prerequisite (no records) no longer holds.
	m, _ = dnsupdate.UpdateFor(dnsupdate.Create, d)
	if err := c.Update(ctx, m); !errors.Is(err, dnsupdate.ErrPrerequisite) {
		t.Fatalf("a second create = %v, want ErrPrerequisite", err)
	}
	o, err = c.Observe(ctx, d.Host, owner)
	if err != nil {
		t.Fatal(err)
	}
	if a, why := dnsupdate.Plan(d, o); a != dnsupdate.Nothing {
		t.Fatalf("plan after create = %s (%s); observed %+v", a, why, o)
	}
	d.Values = []string{"lb.example.net"}
	m, _ = dnsupdate.UpdateFor(dnsupdate.Replace, d)
	if err := c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Query(d.Host, 5 /* CNAME */); len(got) != 1 || got[0] != "lb.example.net" {
		t.Fatalf("CNAME after replace = %v", got)
	}
	// Another owner's delete is refused, ours removes both names.
	if err := c.Update(ctx, dnsupdate.DeleteFor(d.Zone, d.Host, dnsupdate.OwnerValue("other", "web"))); !errors.Is(err, dnsupdate.ErrPrerequisite) {
		t.Fatalf("a delete by another owner = %v, want ErrPrerequisite", err)
	}
	if err := c.Update(ctx, dnsupdate.DeleteFor(d.Zone, d.Host, d.Owner)); err != nil {
		t.Fatal(err)
	}
	o, _ = c.Observe(ctx, d.Host, owner)
	if !o.Empty() || len(o.Owner) != 0 {
		t.Fatalf("after delete: %+v", o)
	}
	bad := &dnsupdate.Client{Server: s.Addr, Key: dnsupdate.Key{Name: testdns.KeyName, Secret: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}
	m, _ = dnsupdate.UpdateFor(dnsupdate.Create, d)
	if err := bad.Update(ctx, m); err == nil {
		t.Fatal("an update signed with a wrong key was accepted")
	}
}

// TestCheckZone: a served zone with the right key passes; a wrong secret, an unknown
// key, a zone the server does not serve and a server that does not answer are each
// told apart.
func TestCheckZone(t *testing.T) {
	s, err := testdns.Start("int.example.test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	key := dnsupdate.Key{Name: testdns.KeyName, Algorithm: testdns.KeyAlgorithm, Secret: s.KeySecret}
	if err := (&dnsupdate.Client{Server: s.Addr, Key: key}).CheckZone(ctx, s.Zone); err != nil {
		t.Fatalf("the served zone with its key: %v", err)
	}
	wrong := key
	wrong.Secret = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	unknown := key
	unknown.Name = "someone-else"
	for _, tc := range []struct {
		name   string
		client dnsupdate.Client
		zone   string
		want   error
	}{
		{"wrong secret", dnsupdate.Client{Server: s.Addr, Key: wrong}, s.Zone, dnsupdate.ErrKeyRejected},
		{"unknown key", dnsupdate.Client{Server: s.Addr, Key: unknown}, s.Zone, dnsupdate.ErrKeyRejected},
		{"zone not served", dnsupdate.Client{Server: s.Addr, Key: key}, "other.example.test", dnsupdate.ErrNotAuthoritative},
		{"no server", dnsupdate.Client{Server: "127.0.0.1:1", Key: key, Timeout: time.Second}, s.Zone, dnsupdate.ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.client.CheckZone(ctx, tc.zone)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckZone = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), key.Secret) {
				t.Fatal("the error quotes the secret")
			}
		})
	}
}
