package dnsupdate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzRecords sorts any target values into records. Properties: a refusal names a
// value; A records are IPv4 addresses and AAAA records IPv6 ones, each written as the
// DNS server writes it back (so that what was written compares equal to what is
// read); a CNAME is a lower-case hostname without the trailing dot; Describe says
// what Records found.
func FuzzRecords(f *testing.F) {
	for _, v := range [][3]string{
		{"192.0.2.2", "192.0.2.1", "192.0.2.1"}, {"2001:db8::1", "192.0.2.1", ""}, {"::ffff:192.0.2.9", "", ""},
		{"LB.Example.com.", "", ""}, {"lb.example.com", "192.0.2.1", ""}, {"a.example.com", "b.example.com", ""},
		{"not a name", "", ""}, {"fe80::1%eth0", "", ""}, {"2001:DB8::0:1", "", ""}, {"1.2.3.4.5", "", ""},
	} {
		f.Add(v[0], v[1], v[2])
	}
	f.Fuzz(func(t *testing.T, v1, v2, v3 string) {
		var values []string
		for _, v := range []string{v1, v2, v3} {
			if v != "" {
				values = append(values, v)
			}
		}
		a, aaaa, cname, err := Records(values)
		if err != nil {
			if !slices.ContainsFunc(values, func(v string) bool {
				return strings.Contains(err.Error(), fmt.Sprintf("%q", v)) || strings.Contains(err.Error(), strings.ToLower(strings.TrimSuffix(v, ".")))
			}) {
				t.Fatalf("Records(%q): the error %q names no value", values, err)
			}
			return
		}
		for _, s := range a {
			ip, err := netip.ParseAddr(s)
			if err != nil || !ip.Is4() || ip.String() != s || netip.AddrFrom4([4]byte(ip.AsSlice())).String() != s {
				t.Fatalf("Records(%q): A %q is not an IPv4 address as the server writes it", values, s)
			}
		}
		for _, s := range aaaa {
			ip, err := netip.ParseAddr(s)
			if err != nil || !ip.Is6() || ip.Is4In6() || netip.AddrFrom16([16]byte(ip.AsSlice())).String() != s {
				t.Fatalf("Records(%q): AAAA %q is not an IPv6 address as the server writes it back", values, s)
			}
		}
		if cname != "" && (len(validation.IsDNS1123Subdomain(cname)) > 0 || cname != strings.ToLower(cname)) {
			t.Fatalf("Records(%q): CNAME %q is not a lower-case hostname", values, cname)
		}
		if d := Describe(values); (len(a)+len(aaaa) > 0 || cname != "") && d == "" {
			t.Fatalf("Describe(%q) is empty", values)
		}
	})
}

// FuzzPlan decides and builds an update for any zone, hostname, values and observed
// records. Properties: a foreign or second ownership record, or records without one,
// is a Conflict with a reason, and Conflict is the only answer that changes nothing
// with a reason; Nothing only when the server holds exactly the records; every update
// packs into a DNS message, and touches only the hostname and its ownership name,
// both in the zone; an update for a hostname outside the zone is refused.
func FuzzPlan(f *testing.F) {
	mine := OwnerValue("shop", "web")
	for _, s := range []struct {
		zone, host, v1, v2, oA, oAAAA, oCNAME, o1, o2 string
		ttl, oTTL                                     uint32
	}{
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "", "", "", "", "", 60, 0},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "192.0.2.1", "", "", mine, "", 60, 60},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "", "", "", mine, "", 60, 0},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "192.0.2.99", "", "", mine, "", 60, 60},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "", "", "x.example.com", mine, "", 60, 60},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "192.0.2.1", "", "", mine, "x", 60, 60},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "198.51.100.1", "", "", "", "", 60, 60},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "", "", "", "", OwnerValue("other", "web"), "", 60, 0},
		{"int.example.com", "web.int.example.com", "192.0.2.1", "2001:db8::1", "", "", "", "", "", 60, 0},
		{"int.example.com", "web.other.com", "192.0.2.1", "", "", "", "", "", "", 60, 0},
		{"example.com", "a.int.example.com", "lb.example.com", "", "", "", "", mine, "", 300, 300},
	} {
		f.Add(s.zone, s.host, s.v1, s.v2, s.oA, s.oAAAA, s.oCNAME, s.o1, s.o2, s.ttl, s.oTTL, "shop", "web")
	}
	f.Fuzz(func(t *testing.T, zone, host, v1, v2, oA, oAAAA, oCNAME, o1, o2 string, ttl, oTTL uint32, ns, name string) {
		d := Desired{Zone: zone, Host: host, Owner: OwnerValue(ns, name), TTL: ttl}
		for _, v := range []string{v1, v2} {
			if v != "" {
				d.Values = append(d.Values, v)
			}
		}
		o := Observed{CNAME: oCNAME, TTL: oTTL}
		if oA != "" {
			o.A = []string{oA}
		}
		if oAAAA != "" {
			o.AAAA = []string{oAAAA}
		}
		for _, v := range []string{o1, o2} {
			if v != "" {
				o.Owner = append(o.Owner, v)
			}
		}
		action, why := Plan(d, o)
		foreign := slices.ContainsFunc(o.Owner, func(v string) bool { return v != d.Owner })
		switch {
		case (foreign || len(o.Owner) > 1 || len(o.Owner) == 0 && !o.Empty()) && action != Conflict:
			t.Fatalf("Plan(%+v, %+v) = %s, want Conflict", d, o, action)
		case action == Conflict && why == "":
			t.Fatal("a Conflict without a reason")
		case action != Conflict && why != "":
			t.Fatalf("%s with a reason: %s", action, why)
		case action == Nothing:
			a, aaaa, cname, err := Records(d.Values)
			if err != nil || !slices.Equal(a, o.A) || !slices.Equal(aaaa, o.AAAA) || cname != o.CNAME || ttl != oTTL {
				t.Fatalf("Plan = Nothing, but %+v is not %+v", d, o)
			}
		}
		for _, act := range []Action{Create, Replace} {
			m, err := UpdateFor(act, d)
			if err != nil {
				if err.Error() == "" {
					t.Fatal("a refusal without a message")
				}
				continue
			}
			zoneName := dns.Fqdn(zone)
			if !dns.IsSubDomain(zoneName, dns.Fqdn(host)) {
				t.Fatalf("UpdateFor(%s) built an update of %s, outside zone %s", act, host, zone)
			}
			if m.Question[0].Name != zoneName {
				t.Fatalf("the update is for zone %s, not %s", m.Question[0].Name, zoneName)
			}
			for _, rr := range append(slices.Clone(m.Answer), m.Ns...) {
				n := rr.Header().Name
				if n != dns.Fqdn(host) && n != dns.Fqdn(OwnerName(host)) || !dns.IsSubDomain(zoneName, n) {
					t.Fatalf("UpdateFor(%s, %+v) touches %s", act, d, n)
				}
			}
			if _, err := m.Pack(); err != nil {
				t.Fatalf("UpdateFor(%s, %+v) does not pack: %v", act, d, err)
			}
		}
	})
}
