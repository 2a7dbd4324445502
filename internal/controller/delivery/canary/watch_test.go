package canary

import (
	"testing"
	"time"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
)

func TestIndexRoutes(t *testing.T) {
	c := newCanary()
	c.Spec.Traffic = deliveryv1alpha1.Traffic{
		HTTPRoute:      &deliveryv1alpha1.HTTPRouteTraffic{Name: "front"},
		VirtualService: &deliveryv1alpha1.VirtualServiceTraffic{Name: "mesh"},
	}
	got := indexRoutes(c)
	want := []string{"shop/HTTPRoute/front", "shop/VirtualService/mesh"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("indexRoutes = %v, want %v", got, want)
	}
}

// A Canary whose routes are not ready looks at them again only where no watch tells
// it of a change: a missing CRD waited for through the CRD watch, or a route of a
// watched kind, brings no requeue, plan's own look again (TrafficNotReady) included.
func TestTrafficRequeue(t *testing.T) {
	missing := routerObservation{reason: "HTTPRouteCRDMissing"}
	ready := routerObservation{}
	watched := func(o routerObservation) routerObservation { o.watched = true; return o }
	tests := []struct {
		name         string
		trafficReady bool
		res          result
		routes       []routerObservation
		want         time.Duration
	}{
		{"traffic ready: plan's requeue", true, result{requeueAfter: time.Minute}, []routerObservation{ready}, time.Minute},
		{"CRD missing, watched: none", false, result{}, []routerObservation{watched(missing)}, 0},
		{"CRD missing, watched, analysis blocked: none", false, result{reason: reasonTrafficNotReady, requeueAfter: trafficRecheck}, []routerObservation{watched(missing)}, 0},
		{"watched, a timed step: kept", false, result{reason: "Progressing", requeueAfter: trafficRecheck}, []routerObservation{watched(missing)}, trafficRecheck},
		{"watched, a sooner requeue: kept", false, result{requeueAfter: time.Second}, []routerObservation{watched(missing), ready}, time.Second},
		{"not watched: trafficRecheck", false, result{}, []routerObservation{missing}, trafficRecheck},
		{"one of two not watched: trafficRecheck", false, result{requeueAfter: time.Hour}, []routerObservation{watched(missing), missing}, trafficRecheck},
		{"not watched, sooner: kept", false, result{requeueAfter: time.Second}, []routerObservation{missing}, time.Second},
	}
	for _, tt := range tests {
		if got := trafficRequeue(&tt.res, &observation{trafficReady: tt.trafficReady}, tt.routes); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
