package servicedomain

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

func zone(name, z string, match map[string]string) networkv1alpha1.DomainZone {
	return networkv1alpha1.DomainZone{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkv1alpha1.DomainZoneSpec{Zone: z, AllowedNamespaces: metav1.LabelSelector{MatchLabels: match}},
	}
}

func TestPickZone(t *testing.T) {
	all := map[string]string{}
	team := map[string]string{"team": "shop"}
	tests := []struct {
		name       string
		zones      []networkv1alpha1.DomainZone
		host       string
		labels     map[string]string
		wantZone   string
		wantReason string
	}{
		{name: "in the zone", zones: []networkv1alpha1.DomainZone{zone("int", "int.example.com", all)}, host: "shop.int.example.com", wantZone: "int"},
		{name: "the zone's apex is not a hostname of it", zones: []networkv1alpha1.DomainZone{zone("int", "int.example.com", all)}, host: "int.example.com", wantReason: "NoZone"},
		{name: "suffix without a dot is another zone", zones: []networkv1alpha1.DomainZone{zone("int", "example.com", all)}, host: "shop.badexample.com", wantReason: "NoZone"},
		{name: "longest zone wins", zones: []networkv1alpha1.DomainZone{zone("outer", "example.com", all), zone("inner", "int.example.com", all)}, host: "a.int.example.com", wantZone: "inner"},
		{name: "not allowed", zones: []networkv1alpha1.DomainZone{zone("int", "int.example.com", team)}, host: "a.int.example.com", labels: map[string]string{"team": "other"}, wantReason: "HostnameNotAllowed"},
		{name: "allowed by label", zones: []networkv1alpha1.DomainZone{zone("int", "int.example.com", team)}, host: "a.int.example.com", labels: team, wantZone: "int"},
		{name: "inner zone denies, outer allows", zones: []networkv1alpha1.DomainZone{zone("outer", "example.com", all), zone("inner", "int.example.com", team)}, host: "a.int.example.com", wantZone: "outer"},
		{name: "two zones of one name", zones: []networkv1alpha1.DomainZone{zone("a", "int.example.com", all), zone("b", "int.example.com", all)}, host: "x.int.example.com", wantReason: "AmbiguousZone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pickZone(tt.zones, tt.host, "ns", tt.labels)
			if tt.wantZone != "" {
				if got.zone == nil || got.zone.Name != tt.wantZone {
					t.Fatalf("zone = %+v, want %s", got, tt.wantZone)
				}
				return
			}
			if got.zone != nil || got.reason != tt.wantReason || got.message == "" {
				t.Fatalf("got zone %v reason %q message %q, want reason %s", got.zone, got.reason, got.message, tt.wantReason)
			}
		})
	}
}
