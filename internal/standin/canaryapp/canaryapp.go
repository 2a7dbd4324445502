// Package canaryapp is the program behind the Canary tests and the Canary sample of
// `make run`: a stand-in for the primary and canary pods of many Deployments, which
// on kwok nodes serve no traffic. It simulates requests to each (namespace, target,
// variant) with the rate, error ratio and latency a test (or `orderly dev up`) sets,
// and serves the resulting request counters and latency histograms at /metrics for a
// real Prometheus to scrape.
package canaryapp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Behaviour is how one variant of one target answers.
type Behaviour struct {
	// RPS is the requests per second simulated (default 20).
	RPS float64
	// ErrorRatio is the share of requests answered with a 500.
	ErrorRatio float64
	// Latency is the median request duration (default 50 ms); durations spread
	// around it by ±30%.
	Latency time.Duration
}

// tick is how often requests are simulated.
const tick = 100 * time.Millisecond

type key struct{ namespace, target, variant string }

type source struct {
	Behaviour
	carry float64 // requests owed from fractional rates
}

// App is a running test program.
type App struct {
	// Address is its host:port, to be scraped at /metrics.
	Address string

	srv      *http.Server
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	stop     chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	sources map[key]*source
	rng     *rand.Rand
}

// Start serves /metrics on a free loopback port and simulates requests until Close.
func Start() (*App, error) {
	return Listen("127.0.0.1:0")
}

// Listen is Start on the address given (host:port).
func Listen(addr string) (*App, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	a := &App{
		Address: l.Addr().String(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "canaryapp_requests_total", Help: "Requests answered, by code.",
		}, []string{"namespace", "target", "variant", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "canaryapp_request_duration_seconds", Help: "Request durations.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2},
		}, []string{"namespace", "target", "variant"}),
		stop:    make(chan struct{}),
		sources: map[key]*source{},
		rng:     rand.New(rand.NewPCG(42, 7)),
	}
	reg.MustRegister(a.requests, a.duration)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	a.wg.Go(func() {
		if err := a.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	})
	a.wg.Go(a.simulate)
	return a, nil
}

// Set makes requests to one variant of one target behave as b from now on.
func (a *App) Set(namespace, target, variant string, b Behaviour) {
	if b.RPS == 0 {
		b.RPS = 20
	}
	if b.Latency == 0 {
		b.Latency = 50 * time.Millisecond
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := key{namespace, target, variant}
	if s, ok := a.sources[k]; ok {
		s.Behaviour = b
		return
	}
	a.sources[k] = &source{Behaviour: b}
	// Both codes exist from the start, so that an error ratio is 0, not "no data".
	a.requests.WithLabelValues(namespace, target, variant, "200")
	a.requests.WithLabelValues(namespace, target, variant, "500")
}

func (a *App) simulate() {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		a.mu.Lock()
		for k, s := range a.sources {
			s.carry += s.RPS * tick.Seconds()
			n := int(s.carry)
			s.carry -= float64(n)
			for range n {
				code := "200"
				if a.rng.Float64() < s.ErrorRatio {
					code = "500"
				}
				a.requests.WithLabelValues(k.namespace, k.target, k.variant, code).Inc()
				spread := 0.7 + 0.6*a.rng.Float64()
				a.duration.WithLabelValues(k.namespace, k.target, k.variant).Observe(s.Latency.Seconds() * spread)
			}
		}
		a.mu.Unlock()
	}
}

// Done is closed when Close is called.
func (a *App) Done() <-chan struct{} { return a.stop }

// Close stops the simulation and the server.
func (a *App) Close() {
	close(a.stop)
	_ = a.srv.Close()
	a.wg.Wait()
}

// ErrorRatioQuery is a PromQL error ratio of one variant of a Canary's target over
// window, with the Canary's placeholders, as tests put it in a Canary's metrics.
func ErrorRatioQuery(window string) string {
	sel := `namespace="{{ .Namespace }}",target="{{ .Target }}",variant="{{ .Variant }}"`
	return `sum(rate(canaryapp_requests_total{` + sel + `,code=~"5.."}[` + window + `])) / sum(rate(canaryapp_requests_total{` + sel + `}[` + window + `]))`
}

// LatencyQuery is the 90th percentile of request durations, like ErrorRatioQuery.
func LatencyQuery(window string) string {
	sel := `namespace="{{ .Namespace }}",target="{{ .Target }}",variant="{{ .Variant }}"`
	return `histogram_quantile(0.9, sum by (le) (rate(canaryapp_request_duration_seconds_bucket{` + sel + `}[` + window + `])))`
}

// ParseSetting reads one variant's behaviour as `orderly dev serve-canary-metrics
// --behaviour` takes it: NAMESPACE/TARGET/VARIANT=RPS,ERROR_RATIO,LATENCY, e.g.
// default/storefront/canary=50,0.01,60ms.
func ParseSetting(s string) (namespace, target, variant string, b Behaviour, err error) {
	who, how, ok := strings.Cut(s, "=")
	parts := strings.Split(who, "/")
	values := strings.Split(how, ",")
	if !ok || len(parts) != 3 || len(values) != 3 || slices.Contains(parts, "") {
		return "", "", "", b, fmt.Errorf("behaviour %q: want NAMESPACE/TARGET/VARIANT=RPS,ERROR_RATIO,LATENCY", s)
	}
	if b.RPS, err = strconv.ParseFloat(values[0], 64); err != nil || b.RPS <= 0 {
		return "", "", "", b, fmt.Errorf("behaviour %q: the rate %q is not a positive number", s, values[0])
	}
	if b.ErrorRatio, err = strconv.ParseFloat(values[1], 64); err != nil || b.ErrorRatio < 0 || b.ErrorRatio > 1 {
		return "", "", "", b, fmt.Errorf("behaviour %q: the error ratio %q is not between 0 and 1", s, values[1])
	}
	if b.Latency, err = time.ParseDuration(values[2]); err != nil || b.Latency <= 0 {
		return "", "", "", b, fmt.Errorf("behaviour %q: the latency %q is not a positive duration", s, values[2])
	}
	return parts[0], parts[1], parts[2], b, nil
}
