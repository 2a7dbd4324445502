package servicedomain

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

// inZone is true when host is a name strictly below zone.
func inZone(host, zone string) bool {
	return zone != "" && strings.HasSuffix(host, "."+zone)
}

// zoneChoice is the zone a hostname falls in, or why there is none.
// reasonHostnameNotAllowed: the hostname's zone does not allow the namespace.
const reasonHostnameNotAllowed = "HostnameNotAllowed"

type zoneChoice struct {
	zone    *networkv1alpha1.DomainZone
	reason  string
	message string
}

// pickZone finds the DomainZone for host among zones, for a ServiceDomain in a
// namespace with nsLabels: the zone with the longest name that host falls in and
// whose allowedNamespaces selects the namespace. A host in a zone that does not
// allow the namespace, and in no other that does, is HostnameNotAllowed; one in no
// zone at all is NoZone; two zones of the same name that both allow it are
// AmbiguousZone (the platform team must fix one).
func pickZone(zones []networkv1alpha1.DomainZone, host, namespace string, nsLabels map[string]string) zoneChoice {
	var best []*networkv1alpha1.DomainZone
	var denied []string
	for i := range zones {
		z := &zones[i]
		if !inZone(host, z.Spec.Zone) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&z.Spec.AllowedNamespaces)
		if err != nil || !sel.Matches(k8slabels.Set(nsLabels)) {
			denied = append(denied, z.Name)
			continue
		}
		switch {
		case len(best) == 0 || len(z.Spec.Zone) > len(best[0].Spec.Zone):
			best = []*networkv1alpha1.DomainZone{z}
		case len(z.Spec.Zone) == len(best[0].Spec.Zone):
			best = append(best, z)
		}
	}
	switch {
	case len(best) == 1:
		return zoneChoice{zone: best[0]}
	case len(best) > 1:
		return zoneChoice{reason: "AmbiguousZone", message: fmt.Sprintf("DomainZones %s and %s both serve zone %s for namespace %s; a platform admin must narrow one's allowedNamespaces", best[0].Name, best[1].Name, best[0].Spec.Zone, namespace)}
	case len(denied) > 0:
		return zoneChoice{reason: reasonHostnameNotAllowed, message: fmt.Sprintf("%s falls in DomainZone %s, whose allowedNamespaces does not select namespace %s; ask a platform admin, or use a hostname in a zone open to this namespace", host, strings.Join(denied, ", "), namespace)}
	default:
		return zoneChoice{reason: "NoZone", message: fmt.Sprintf("%s falls in no DomainZone; use a hostname that ends in one of the zones (kubectl get domainzones)", host)}
	}
}
