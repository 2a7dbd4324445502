package canary

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"orderly.dev/orderly/internal/kit"
)

// maxResponse bounds what is read of one Prometheus answer: a query returning more is
// refused rather than allowed to grow the manager's memory.
const maxResponse = 8 << 20

// maxPoints is the most samples Prometheus returns per series of a range query.
const maxPoints = 11000

// credentials authenticate Orderly to a Prometheus server. They are read from the
// Canary's Secret for each analysis and never logged or reported.
type credentials struct {
	token, username, password string
	ca                        []byte
}

// ProviderError says that Prometheus could not be queried: unreachable, too slow,
// or answering with a server error. It never counts as a failed check.
type ProviderError struct{ err error }

func (e *ProviderError) Error() string { return e.err.Error() }
func (e *ProviderError) Unwrap() error { return e.err }

// QueryError says that Prometheus refused a query as malformed.
type QueryError struct{ msg string }

func (e *QueryError) Error() string { return e.msg }

// prometheusClients makes the HTTP clients Orderly talks to Prometheus servers with:
// one per address and CA, reused so that connections are kept alive. Redirects are
// not followed, so credentials go only to the address the Canary names.
type prometheusClients struct {
	mu      sync.Mutex
	clients map[string]*http.Client
}

func newPrometheusClients() *prometheusClients {
	return &prometheusClients{clients: map[string]*http.Client{}}
}

func (p *prometheusClients) client(address string, ca []byte) (*http.Client, error) {
	sum := sha256.Sum256(ca)
	key := address + "#" + hex.EncodeToString(sum[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		return c, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 8
	tr.ForceAttemptHTTP2 = false
	tr.Proxy = nil
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("the Secret's ca.crt holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	p.clients[key] = c
	return c, nil
}

// promServer is one Prometheus server as one Canary reaches it.
type promServer struct {
	http    *http.Client
	base    *url.URL
	creds   credentials
	timeout time.Duration
	// queries counts the requests made, by result, for the metrics.
	onQuery func(err error, took time.Duration)
}

// get calls path with params and decodes the answer's data into out. Every call has
// the provider's timeout as its deadline.
func (p *promServer) get(ctx context.Context, path string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	u := *p.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), http.NoBody)
	if err != nil {
		return &ProviderError{err: err}
	}
	switch {
	case p.creds.token != "":
		req.Header.Set("Authorization", "Bearer "+p.creds.token)
	case p.creds.username != "":
		req.SetBasicAuth(p.creds.username, p.creds.password)
	}
	start := time.Now()
	err = p.do(req, out)
	if p.onQuery != nil {
		p.onQuery(err, time.Since(start))
	}
	return err
}

func (p *promServer) do(req *http.Request, out any) error {
	resp, err := p.http.Do(req)
	if err != nil {
		// The URL (with the address only, never credentials) is in the error; the
		// request's context deadline shows as such.
		return &ProviderError{err: scrubURLError(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return &ProviderError{err: fmt.Errorf("reading Prometheus' answer: %w", scrubURLError(err))}
	}
	if len(body) > maxResponse {
		return &QueryError{msg: fmt.Sprintf("Prometheus' answer is larger than %d MiB: make the query return fewer series", maxResponse>>20)}
	}
	var envelope struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if jerr := json.Unmarshal(body, &envelope); jerr != nil || envelope.Status == "" {
		// Not Prometheus' API (a proxy's error page, a wrong address): its body is not
		// repeated, only the status.
		return &ProviderError{err: fmt.Errorf("%s answered HTTP %d without a Prometheus API response", req.URL.Host, resp.StatusCode)}
	}
	if envelope.Status != "success" {
		msg := kit.Truncate(envelope.Error, 300)
		if msg == "" {
			msg = fmt.Sprintf("Prometheus answered status %q without saying why", kit.Truncate(envelope.Status, 40))
		}
		if resp.StatusCode == http.StatusBadRequest && envelope.ErrorType == "bad_data" {
			return &QueryError{msg: msg}
		}
		return &ProviderError{err: fmt.Errorf("prometheus answered HTTP %d (%s): %s", resp.StatusCode, envelope.ErrorType, msg)}
	}
	if err := json.Unmarshal(envelope.Data, out); err != nil {
		return &ProviderError{err: fmt.Errorf("decoding Prometheus' answer: %w", err)}
	}
	return nil
}

// scrubURLError drops the query string from an error of the HTTP client: it holds
// the query, which is long and says nothing about why the call failed. It is not
// database.Scrubber, the credential scrubber of the data controllers: that one
// replaces secrets it is told of, while this one knows no secret and cuts parts of
// a URL (the query is no secret; the user info is never set).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		if perr == nil {
			u.RawQuery, u.User = "", nil
			return fmt.Errorf("%s %s: %w", ue.Op, u.Redacted(), ue.Err)
		}
	}
	return err
}

// Validate asks Prometheus whether query parses. format_query (Prometheus 2.40 and
// later) parses without evaluating; older servers are asked for an instant query at
// time 1 (1970), which parses the same way and finds no data to read.
func (p *promServer) Validate(ctx context.Context, query string) error {
	var formatted string
	err := p.get(ctx, "/api/v1/format_query", url.Values{"query": {query}}, &formatted)
	var pe *ProviderError
	if errors.As(err, &pe) && strings.Contains(pe.Error(), "HTTP 404") {
		var ignored json.RawMessage
		return p.get(ctx, "/api/v1/query", url.Values{"query": {query}, "time": {"1"}}, &ignored)
	}
	return err
}

// QueryRange evaluates query from start to end every step and returns every sample of
// every series, in no particular order. NaN and infinite values are kept (the judge
// drops them).
func (p *promServer) QueryRange(ctx context.Context, query string, start, end time.Time, step time.Duration) ([]float64, error) {
	// Prometheus refuses more than 11,000 points per series.
	if n := end.Sub(start) / step; n >= maxPoints {
		step = end.Sub(start)/(maxPoints-1) + time.Millisecond
	}
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Values [][2]json.RawMessage `json:"values"`
		} `json:"result"`
	}
	params := url.Values{
		"query": {query},
		"start": {formatTime(start)},
		"end":   {formatTime(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	if err := p.get(ctx, "/api/v1/query_range", params, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "matrix" {
		return nil, &QueryError{msg: fmt.Sprintf("the query returned a %s, not a range of samples", data.ResultType)}
	}
	var out []float64
	for _, series := range data.Result {
		for _, pair := range series.Values {
			var s string
			if err := json.Unmarshal(pair[1], &s); err != nil {
				return nil, &ProviderError{err: fmt.Errorf("decoding a sample: %w", err)}
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				v = math.NaN()
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// gate keeps one slow or unreachable Prometheus from holding the controller's
// workers: at most limit analyses talk to one address at once (others come back
// shortly instead of waiting), and after a request to an address failed for lack of
// an answer, analyses against it report it unavailable at once for a cool-down
// instead of each waiting out its timeout.
type gate struct {
	mu        sync.Mutex
	limit     int
	cooldown  time.Duration
	inFlight  map[string]int
	downUntil map[string]time.Time
	lastErr   map[string]error
}

func newGate(limit int, cooldown time.Duration) *gate {
	return &gate{limit: max(limit, 1), cooldown: cooldown, inFlight: map[string]int{}, downUntil: map[string]time.Time{}, lastErr: map[string]error{}}
}

// errBusy: the address has as many analyses in flight as allowed.
var errBusy = errors.New("busy")

// enter admits one analysis against address at now, or says why not: errBusy, or a
// ProviderError while the address cools down.
func (g *gate) enter(address string, now time.Time) (leave func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until, ok := g.downUntil[address]; ok && now.Before(until) {
		return nil, &ProviderError{err: fmt.Errorf("not asked again until %s: %w", until.UTC().Format(time.RFC3339), g.lastErr[address])}
	}
	if g.inFlight[address] >= g.limit {
		return nil, errBusy
	}
	g.inFlight[address]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.inFlight[address]--; g.inFlight[address] <= 0 {
				delete(g.inFlight, address)
			}
		})
	}, nil
}

// report records the outcome of a request to address: a timeout or a refused
// connection starts a cool-down; an answer ends it.
func (g *gate) report(address string, now time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var pe *ProviderError
	if err == nil || !errors.As(err, &pe) || !unreachable(err) {
		delete(g.downUntil, address)
		delete(g.lastErr, address)
		return
	}
	g.downUntil[address] = now.Add(g.cooldown)
	g.lastErr[address] = err
}

// unreachable: the error is the lack of an answer (a deadline, a refused or reset
// connection), not an answer.
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "connection reset", "Client.Timeout", "deadline exceeded", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
