package canary

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzPrometheusAnswer has a query answered by a server that returns any status and
// body: a Canary's provider address is whatever its namespace's user writes, so the
// answer is input too. Properties: no panic; a failure is a QueryError or a
// ProviderError with a message; the body of an answer that is not Prometheus' API is
// never repeated in it (it could be anything, and status is read by others); every
// sample returned was in the answer.
func FuzzPrometheusAnswer(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"0.5"],[2,"NaN"]]}]}}`},
		{200, `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{400, `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`},
		{503, `{"status":"error","errorType":"unavailable","error":"` + strings.Repeat("x", 400) + `"}`},
		{502, `<html>bad gateway: secret-token-123</html>`},
		{200, `{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,2]]}]}}`},
		{200, `{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1]]}]}}`},
	} {
		f.Add(s.status, []byte(s.body))
	}
	var mu sync.Mutex
	var status int
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		st, b := status, body
		mu.Unlock()
		w.WriteHeader(st)
		_, _ = w.Write(b)
	}))
	f.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	c, err := newPrometheusClients().client(srv.URL, nil)
	if err != nil {
		f.Fatal(err)
	}
	p := &promServer{http: c, base: base, timeout: 5 * time.Second}
	f.Fuzz(func(t *testing.T, st int, b []byte) {
		if st < 200 || st > 599 {
			st = 200 + (st%400+400)%400
		}
		mu.Lock()
		status, body = st, b
		mu.Unlock()
		start := time.Unix(1000, 0)
		samples, err := p.QueryRange(context.Background(), "up", start, start.Add(time.Minute), 5*time.Second)
		if err != nil {
			var qe *QueryError
			var pe *ProviderError
			if !errors.As(err, &qe) && !errors.As(err, &pe) || err.Error() == "" {
				t.Fatalf("error %T %q", err, err)
			}
			if len(b) >= 16 && !strings.HasPrefix(strings.TrimSpace(string(b)), "{") && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("the error repeats the answer's body: %v", err)
			}
			if len(err.Error()) > 600 {
				t.Fatalf("an error of %d bytes", len(err.Error()))
			}
			return
		}
		if len(samples) > len(b) {
			t.Fatalf("%d samples from %d bytes", len(samples), len(b))
		}
	})
}
