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
