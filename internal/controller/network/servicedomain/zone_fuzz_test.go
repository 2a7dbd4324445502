package servicedomain

import (
	"regexp"
	"testing"

	mdns "github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/dnsupdate"
)

// The CRDs' rules for a ServiceDomain's hostname and a DomainZone's zone.
var (
	apiHostname = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?[.])+[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	apiZone     = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?[.])*[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// FuzzPickZone picks the zone of any hostname among three DomainZones, each open to
// every namespace or to one team, for a namespace of any team. Properties: the zone
// picked holds the hostname (strictly below its apex) and selects the namespace, and
// no zone that also does has a longer name or the same one; with none picked, the
// reason and message say why (no zone holds it, or none that does allows it); and the
// update of a picked zone, for a hostname and zone the API server accepts, touches
// only names in that zone.
func FuzzPickZone(f *testing.F) {
	for _, s := range [][6]string{
		{"int.example.com", "", "", "shop.int.example.com", "", ""},
		{"int.example.com", "", "", "int.example.com", "", ""},
		{"example.com", "", "", "shop.badexample.com", "", ""},
		{"example.com", "int.example.com", "", "a.int.example.com", "", ""},
		{"int.example.com", "", "", "a.int.example.com", "shop", "other"},
		{"example.com", "int.example.com", "", "a.int.example.com", "shop", "other"},
		{"int.example.com", "int.example.com", "", "x.int.example.com", "", ""},
		{"a.b", "b", "c", "x.y.a.b", "t", "t"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, z1, z2, z3, host, team, nsTeam string) {
		var zones []networkv1alpha1.DomainZone
		for i, z := range []string{z1, z2, z3} {
			if z == "" {
				continue
			}
			sel := map[string]string{}
			if i == 1 && team != "" {
				sel["team"] = team // the second zone is one team's
			}
			zones = append(zones, zone(string(rune('a'+i)), z, sel))
		}
		labels := map[string]string{"team": nsTeam}
		allows := func(z *networkv1alpha1.DomainZone) bool {
			s, err := metav1.LabelSelectorAsSelector(&z.Spec.AllowedNamespaces)
			return err == nil && s.Matches(k8slabels.Set(labels))
		}
		got := pickZone(zones, host, "ns", labels)
		if got.zone == nil {
			if got.reason == "" || got.message == "" {
				t.Fatalf("no zone and no reason: %+v", got)
			}
			holds := false
			for i := range zones {
				holds = holds || inZone(host, zones[i].Spec.Zone)
			}
			if got.reason == "NoZone" && holds || got.reason == reasonHostnameNotAllowed && !holds {
				t.Fatalf("reason %s for %s in %v", got.reason, host, zones)
			}
			return
		}
		if !inZone(host, got.zone.Spec.Zone) || !allows(got.zone) {
			t.Fatalf("%s got zone %s (%s), which does not hold it or allow the namespace", host, got.zone.Name, got.zone.Spec.Zone)
		}
		for i := range zones {
			z := &zones[i]
			if z != got.zone && inZone(host, z.Spec.Zone) && allows(z) && len(z.Spec.Zone) >= len(got.zone.Spec.Zone) {
				t.Fatalf("%s got zone %s, but %s (%s) also holds it", host, got.zone.Spec.Zone, z.Name, z.Spec.Zone)
			}
		}
		if !apiHostname.MatchString(host) || len(host) > 238 || !apiZone.MatchString(got.zone.Spec.Zone) || len(got.zone.Spec.Zone) > 253 {
			return
		}
		d := dnsupdate.Desired{Zone: got.zone.Spec.Zone, Host: host, Owner: dnsupdate.OwnerValue("ns", "web"), Values: []string{"192.0.2.1"}, TTL: 60}
		m, err := dnsupdate.UpdateFor(dnsupdate.Create, d)
		if err != nil {
			t.Fatalf("UpdateFor(%+v): %v", d, err)
		}
		for _, rr := range append(m.Answer, m.Ns...) {
			if !mdns.IsSubDomain(mdns.Fqdn(got.zone.Spec.Zone), rr.Header().Name) {
				t.Fatalf("the update of zone %s touches %s", got.zone.Spec.Zone, rr.Header().Name)
			}
		}
	})
}
