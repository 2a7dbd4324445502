package canary

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func serverFor(t *testing.T, h http.HandlerFunc) *promServer {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	base, _ := url.Parse(s.URL)
	c, err := newPrometheusClients().client(s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &promServer{http: c, base: base, timeout: 300 * time.Millisecond, creds: credentials{token: "s3cret"}}
}

func TestPrometheusProtocol(t *testing.T) {
	var auth atomic.Value
	p := serverFor(t, func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		q := r.URL.Query().Get("query")
		switch {
		case r.URL.Path == "/api/v1/format_query" && strings.Contains(q, "("):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"}`))
		case r.URL.Path == "/api/v1/format_query":
			_, _ = w.Write([]byte(`{"status":"success","data":"up"}`))
		case q == "down":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"unavailable","error":"shutting down"}`))
		case q == "silent":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data"}`))
		case q == "html":
			_, _ = w.Write([]byte(`<html>proxy error</html>`))
		case q == "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		default:
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[[1,"0.5"],[2,"NaN"]]},{"metric":{"a":"2"},"values":[[1,"1"]]}]}}`))
		}
	})
	ctx := context.Background()
	var qe *QueryError
	if err := p.Validate(ctx, "sum(up"); !errors.As(err, &qe) || !strings.Contains(err.Error(), "unclosed") {
		t.Fatalf("bad query: %v", err)
	}
	if err := p.Validate(ctx, "up"); err != nil {
		t.Fatalf("good query: %v", err)
	}
	if got := auth.Load(); got != "Bearer s3cret" {
		t.Fatalf("Authorization %q", got)
	}
	values, err := p.QueryRange(ctx, "ok", t0, t0.Add(time.Minute), time.Second)
	if err != nil || len(values) != 3 || values[0] != 0.5 || !math.IsNaN(values[1]) || values[2] != 1 {
		t.Fatalf("values %v, %v", values, err)
	}
	var pe *ProviderError
	if _, err := p.QueryRange(ctx, "down", t0, t0.Add(time.Minute), time.Second); !errors.As(err, &pe) {
		t.Fatalf("503: %v", err)
	}
	// A refusal without a message was a QueryError with an empty one (found by
	// FuzzPrometheusAnswer): the Canary's condition said nothing.
	if _, err := p.QueryRange(ctx, "silent", t0, t0.Add(time.Minute), time.Second); !errors.As(err, &qe) || !strings.Contains(err.Error(), "without saying why") {
		t.Fatalf("a refusal without a message: %v", err)
	}
	if _, err := p.QueryRange(ctx, "html", t0, t0.Add(time.Minute), time.Second); !errors.As(err, &pe) || strings.Contains(err.Error(), "proxy error") {
		t.Fatalf("a non-Prometheus answer: %v (its body must not be repeated)", err)
	}
	start := time.Now()
	_, err = p.QueryRange(ctx, "slow", t0, t0.Add(time.Minute), time.Second)
	if !errors.As(err, &pe) || !unreachable(err) || time.Since(start) > time.Second {
		t.Fatalf("slow server: %v after %s (timeout 300ms)", err, time.Since(start))
	}
	if strings.Contains(err.Error(), "query=") {
		t.Fatalf("the query string is in the error: %v", err)
	}
}

// A redirect is not followed: the credentials go to the Canary's address only.
func TestPrometheusDoesNotFollowRedirects(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	p := serverFor(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	})
	if err := p.Validate(context.Background(), "up"); err == nil {
		t.Fatal("a redirect was taken as an answer")
	}
	if leaked.Load() {
		t.Fatal("the token was sent to the redirect's target")
	}
}

func TestQueryRangeStaysWithinPrometheusPointLimit(t *testing.T) {
	var step atomic.Value
	p := serverFor(t, func(w http.ResponseWriter, r *http.Request) {
		step.Store(r.URL.Query().Get("step"))
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`))
	})
	if _, err := p.QueryRange(context.Background(), "up", t0, t0.Add(24*time.Hour), time.Second); err != nil {
		t.Fatal(err)
	}
	if s := step.Load().(string); s == "1" {
		t.Fatalf("step %s for a day: more than 11,000 points", s)
	}
}

func TestGate(t *testing.T) {
	g := newGate(2, 5*time.Second)
	a, err := g.enter("p", t0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := g.enter("p", t0)
	if _, err := g.enter("p", t0); !errors.Is(err, errBusy) {
		t.Fatalf("third analysis on one address: %v", err)
	}
	if leave, err := g.enter("q", t0); err != nil {
		t.Fatalf("another address is not limited by the first: %v", err)
	} else {
		leave()
	}
	a()
	a() // leaving twice counts once
	c, err := g.enter("p", t0)
	if err != nil {
		t.Fatal(err)
	}
	b()
	c()
	// An address that does not answer is not asked again during the cool-down.
	g.report("p", t0, &ProviderError{err: context.DeadlineExceeded})
	var pe *ProviderError
	if _, err := g.enter("p", t0.Add(time.Second)); !errors.As(err, &pe) {
		t.Fatalf("during the cool-down: %v", err)
	}
	leave, err := g.enter("p", t0.Add(6*time.Second))
	if err != nil {
		t.Fatalf("after the cool-down: %v", err)
	}
	leave()
	// An answer, even an error one, ends it.
	g.report("p", t0.Add(6*time.Second), &ProviderError{err: errors.New("prometheus answered HTTP 503")})
	if leave, err := g.enter("p", t0.Add(6*time.Second)); err != nil {
		t.Fatalf("after an answer: %v", err)
	} else {
		leave()
	}
}
