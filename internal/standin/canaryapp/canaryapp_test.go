package canaryapp

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAppServesWhatItSimulates(t *testing.T) {
	a, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Set("shop", "web", "canary", Behaviour{RPS: 100, ErrorRatio: 1})
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + a.Address + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		s := string(body)
		if strings.Contains(s, `canaryapp_requests_total{code="500",namespace="shop",target="web",variant="canary"}`) &&
			!strings.Contains(s, `canaryapp_requests_total{code="500",namespace="shop",target="web",variant="canary"} 0`) &&
			strings.Contains(s, `canaryapp_requests_total{code="200",namespace="shop",target="web",variant="canary"} 0`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no errors counted after 5s:\n%s", s)
		}
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // polling an HTTP endpoint with a deadline
	}
}

func TestParseSetting(t *testing.T) {
	ns, target, variant, b, err := ParseSetting("default/storefront/canary=50,0.2,60ms")
	if err != nil || ns != "default" || target != "storefront" || variant != "canary" ||
		b != (Behaviour{RPS: 50, ErrorRatio: 0.2, Latency: 60 * time.Millisecond}) {
		t.Fatalf("got %s %s %s %+v %v", ns, target, variant, b, err)
	}
	for _, bad := range []string{"default/storefront=50,0.2,60ms", "a/b/c=0,0,1s", "a/b/c=1,2,1s", "a/b/c=1,0,x", "a/b/c", "//c=1,0,1s"} {
		if _, _, _, _, err := ParseSetting(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
