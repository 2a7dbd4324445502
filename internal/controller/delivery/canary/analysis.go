package canary

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/controller/delivery/canary/judge"
	"orderly.dev/orderly/internal/kit"
)

// queryVars are the placeholders of a metric query.
type queryVars struct {
	Target    string
	Namespace string
	Variant   string
}

// maxQueryBytes bounds a rendered query: the API allows 4096 bytes of query, and
// each placeholder is a name of at most 253.
const maxQueryBytes = 16 << 10

// renderQuery fills in a metric query's placeholders. Only .Target, .Namespace and
// .Variant exist; anything else is an error, found before Prometheus is asked. The
// template is a user's, run in the manager: no loops, bounded output
// (kit.ParseTemplate).
func renderQuery(query string, vars queryVars) (string, error) {
	t, err := kit.ParseTemplate("query", query, maxQueryBytes)
	if err != nil {
		return "", fmt.Errorf("the query is not a valid template: %w", err)
	}
	out, err := t.Execute(vars)
	if errors.Is(err, kit.ErrTemplateTooLong) {
		return "", fmt.Errorf("the query renders to more than %d bytes", maxQueryBytes)
	}
	if err != nil {
		return "", fmt.Errorf("the query's placeholders: %w (use {{ .Target }}, {{ .Namespace }} and {{ .Variant }})", err)
	}
	return out, nil
}

// renderedQuery is one query as sent: a metric, for one variant.
type renderedQuery struct {
	metric  string
	variant string
	query   string
}

// renderAll renders every query the analysis sends: the canary's for each metric,
// and the primary's for baseline comparisons.
func renderAll(c *deliveryv1alpha1.Canary) ([]renderedQuery, error) {
	var out []renderedQuery
	for _, m := range c.Spec.Analysis.Metrics {
		variants := []string{deliveryv1alpha1.VariantCanary}
		if m.Baseline != nil {
			variants = append(variants, deliveryv1alpha1.VariantPrimary)
		}
		for _, v := range variants {
			q, err := renderQuery(m.Query, queryVars{Target: c.Spec.TargetRef.Name, Namespace: c.Namespace, Variant: v})
			if err != nil {
				return nil, fmt.Errorf("metric %s: %w", m.Name, err)
			}
			out = append(out, renderedQuery{metric: m.Name, variant: v, query: q})
		}
	}
	return out, nil
}

// readCredentials reads the provider's Secret, from the Canary's own namespace only.
func readCredentials(ctx context.Context, reader client.Reader, c *deliveryv1alpha1.Canary) (credentials, error) {
	ref := c.Spec.Analysis.Provider.SecretRef
	if ref == nil {
		return credentials{}, nil
	}
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return credentials{}, &ProviderError{err: fmt.Errorf("the provider's Secret %s does not exist in namespace %s", ref.Name, c.Namespace)}
		}
		return credentials{}, &ProviderError{err: fmt.Errorf("reading the provider's Secret %s: %w", ref.Name, err)}
	}
	creds := credentials{token: strings.TrimSpace(string(s.Data["token"])), username: string(s.Data["username"]), password: string(s.Data["password"]), ca: s.Data["ca.crt"]}
	if creds.token == "" && creds.username == "" && len(creds.ca) == 0 {
		return credentials{}, &ProviderError{err: fmt.Errorf("the provider's Secret %s has none of the keys token, username and password, ca.crt", ref.Name)}
	}
	return creds, nil
}

// connect builds the client of the Canary's Prometheus.
func (r *Reconciler) connect(ctx context.Context, c *deliveryv1alpha1.Canary) (*promServer, error) {
	creds, err := readCredentials(ctx, r.APIReader, c)
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(c.Spec.Analysis.Provider.Address)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, &QueryError{msg: "the provider address is not an http(s) URL"}
	}
	httpClient, err := r.prom.client(base.String(), creds.ca)
	if err != nil {
		return nil, &ProviderError{err: err}
	}
	timeout := c.Spec.Analysis.Provider.Timeout.Duration
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &promServer{http: httpClient, base: base, creds: creds, timeout: timeout, onQuery: recordQuery}, nil
}

// validate asks Prometheus to parse every query. It returns a QueryError for a query
// it refuses (or a placeholder that is unknown), a ProviderError when it could not
// be asked.
func (r *Reconciler) validate(ctx context.Context, c *deliveryv1alpha1.Canary) error {
	queries, err := renderAll(c)
	if err != nil {
		return &QueryError{msg: err.Error()}
	}
	return r.withProvider(ctx, c, func(p *promServer) error {
		for _, q := range queries {
			if err := p.Validate(ctx, q.query); err != nil {
				var qe *QueryError
				if errors.As(err, &qe) {
					return &QueryError{msg: fmt.Sprintf("metric %s (%s): Prometheus refuses the query: %s", q.metric, q.variant, qe.msg)}
				}
				return err
			}
		}
		return nil
	})
}

// withProvider runs f with the Canary's Prometheus, through the gate.
func (r *Reconciler) withProvider(ctx context.Context, c *deliveryv1alpha1.Canary, f func(*promServer) error) error {
	address := c.Spec.Analysis.Provider.Address
	leave, err := r.gate.enter(address, r.clock().Now())
	if err != nil {
		return err
	}
	defer leave()
	p, err := r.connect(ctx, c)
	if err != nil {
		return err
	}
	err = f(p)
	r.gate.report(address, r.clock().Now(), err)
	return err
}

// analyse judges the current step over [stepStartedAt, now]: every metric's queries
// run at once, each with the provider's deadline.
func (r *Reconciler) analyse(ctx context.Context, c *deliveryv1alpha1.Canary, now time.Time) (*outcome, error) {
	queries, err := renderAll(c)
	if err != nil {
		return nil, &QueryError{msg: err.Error()}
	}
	start := c.Status.StepStartedAt.Time
	if !start.Before(now) {
		start = now.Add(-time.Second)
	}
	step := c.Spec.Analysis.Resolution.Duration
	if step <= 0 {
		step = 5 * time.Second
	}
	samples := make(map[string][]float64, len(queries))
	err = r.withProvider(ctx, c, func(p *promServer) error {
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			firstErr error
		)
		for _, q := range queries {
			wg.Go(func() {
				values, err := p.QueryRange(ctx, q.query, start, now, step)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					var qe *QueryError
					if errors.As(err, &qe) {
						err = &QueryError{msg: fmt.Sprintf("metric %s (%s): %s", q.metric, q.variant, qe.msg)}
					}
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				samples[q.metric+"/"+q.variant] = values
			})
		}
		wg.Wait()
		return firstErr
	})
	if err != nil {
		var qe *QueryError
		if errors.As(err, &qe) || errors.Is(err, errBusy) {
			return nil, err
		}
		return &outcome{providerErr: err}, nil
	}
	return judgeStep(c, start, now, samples), nil
}

// judgeStep turns the samples of every metric into the step's decision: it fails when
// one metric fails, is inconclusive when one is (and none fails), and passes
// otherwise. samples is keyed by "<metric>/<variant>".
func judgeStep(c *deliveryv1alpha1.Canary, start, now time.Time, samples map[string][]float64) *outcome {
	d := &deliveryv1alpha1.StepDecision{
		Revision: c.Status.Revision, Step: c.Status.CurrentStep, Weight: c.Status.CanaryWeight,
		Time: metav1.NewTime(now), WindowStart: &metav1.Time{Time: start},
	}
	var failed, inconclusive []string
	for _, m := range c.Spec.Analysis.Metrics {
		canary := judge.Clean(samples[m.Name+"/"+deliveryv1alpha1.VariantCanary])
		minSamples := int(m.MinSamples)
		if minSamples <= 0 {
			minSamples = 10
		}
		var res judge.Result
		if m.Baseline != nil {
			baseline := judge.Clean(samples[m.Name+"/"+deliveryv1alpha1.VariantPrimary])
			res = judge.Compare(canary, baseline, baselineRule(m.Baseline), minSamples)
		} else {
			res = judge.Threshold(canary, thresholdRule(m.Threshold), minSamples)
		}
		md := deliveryv1alpha1.MetricDecision{Name: m.Name, Verdict: deliveryv1alpha1.Verdict(res.Verdict), Canary: summary(res.Canary), Reason: kit.Truncate(res.Reason, 512)}
		if m.Baseline != nil {
			md.Baseline = summary(res.Baseline)
		}
		if res.Tested {
			md.Statistic, md.PValue = judge.Format(res.U), judge.Format(res.P)
			md.Effect, md.AllowedEffect = judge.Format(res.Effect), judge.Format(res.Allowed)
		}
		d.Metrics = append(d.Metrics, md)
		switch res.Verdict {
		case judge.Fail:
			failed = append(failed, m.Name+": "+res.Reason)
		case judge.Inconclusive:
			inconclusive = append(inconclusive, m.Name+": "+res.Reason)
		}
	}
	out := &outcome{decision: d}
	switch {
	case len(failed) > 0:
		out.verdict, d.Reason = deliveryv1alpha1.VerdictFail, strings.Join(failed, "; ")
	case len(inconclusive) > 0:
		out.verdict, d.Reason = deliveryv1alpha1.VerdictInconclusive, strings.Join(inconclusive, "; ")
	default:
		out.verdict, d.Reason = deliveryv1alpha1.VerdictPass, fmt.Sprintf("all %d metrics passed", len(c.Spec.Analysis.Metrics))
	}
	d.Verdict = out.verdict
	d.Reason = kit.Truncate(d.Reason, 1024)
	return out
}

func summary(s judge.Summary) *deliveryv1alpha1.SampleSummary {
	if s.Count == 0 {
		return &deliveryv1alpha1.SampleSummary{}
	}
	return &deliveryv1alpha1.SampleSummary{Count: int32(min(s.Count, 1<<30)), Mean: judge.Format(s.Mean), Median: judge.Format(s.Median), Min: judge.Format(s.Min), Max: judge.Format(s.Max)}
}

// parseDecimal reads a number the API validated; a value it let through that does
// not parse counts as zero.
func parseDecimal(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return v
}

func baselineRule(b *deliveryv1alpha1.BaselineComparison) judge.BaselineRule {
	rule := judge.BaselineRule{
		HigherIsWorse:    b.Direction != deliveryv1alpha1.LowerIsWorse,
		MaxRelativeShift: parseDecimal(b.MaxRelativeShift),
		MaxAbsoluteShift: parseDecimal(b.MaxAbsoluteShift),
		Alpha:            parseDecimal(b.Alpha),
	}
	if b.MaxRelativeShift == "" {
		rule.MaxRelativeShift = 0.1
	}
	if rule.Alpha <= 0 {
		rule.Alpha = 0.05
	}
	return rule
}

func thresholdRule(t *deliveryv1alpha1.Threshold) judge.ThresholdRule {
	var rule judge.ThresholdRule
	if t == nil {
		return rule
	}
	if t.Min != nil {
		v := parseDecimal(*t.Min)
		rule.Min = &v
	}
	if t.Max != nil {
		v := parseDecimal(*t.Max)
		rule.Max = &v
	}
	return rule
}
