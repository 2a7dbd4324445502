package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestSetClientLimits(t *testing.T) {
	// A REST client of each kind made from the config, as controller-runtime makes one per kind.
	limiterOf := func(t *testing.T, cfg *rest.Config) flowcontrol.RateLimiter {
		t.Helper()
		c := rest.CopyConfig(cfg)
		c.Host = "https://127.0.0.1:1"
		c.GroupVersion = &corev1.SchemeGroupVersion
		c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
		rc, err := rest.RESTClientFor(c)
		if err != nil {
			t.Fatal(err)
		}
		return rc.GetRateLimiter()
	}
	t.Run("no client-side limit by default", func(t *testing.T) {
		cfg := &rest.Config{}
		if err := setClientLimits(cfg, 0, 0); err != nil {
			t.Fatal(err)
		}
		if l := limiterOf(t, cfg); l != nil {
			t.Errorf("a client has a rate limiter of %v QPS; want none", l.QPS())
		}
	})
	t.Run("one limiter for the whole process when asked", func(t *testing.T) {
		cfg := &rest.Config{}
		if err := setClientLimits(cfg, 50, 0); err != nil {
			t.Fatal(err)
		}
		a, b := limiterOf(t, cfg), limiterOf(t, cfg)
		if a == nil || a != b {
			t.Fatalf("limiters %v and %v: want one shared", a, b)
		}
		if a.QPS() != 50 || cfg.Burst != 100 {
			t.Errorf("QPS %v burst %d, want 50 and twice that", a.QPS(), cfg.Burst)
		}
		if err := setClientLimits(cfg, 20, 30); err != nil || cfg.Burst != 30 {
			t.Errorf("burst %d (%v), want 30", cfg.Burst, err)
		}
	})
	t.Run("negative values are refused", func(t *testing.T) {
		err := setClientLimits(&rest.Config{}, -1, 0)
		if err == nil || !strings.Contains(err.Error(), "--kube-api-qps") {
			t.Errorf("err = %v", err)
		}
	})
}
