// Package metricsauth lets through to the metrics endpoint only callers that the API
// server authenticates (TokenReview) and authorises to get the path
// (SubjectAccessReview on a non-resource URL).
//
// It does what controller-runtime's filters.WithAuthenticationAndAuthorization does,
// in a page of code: that one links k8s.io/apiserver and some 25 modules behind it
// (gRPC, OpenTelemetry, CEL) into the manager for one check per scrape.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// allowedFor and deniedFor are how long a decision is reused: a scraper every 15 s
	// then costs two API requests a minute, and a revoked binding takes effect within
	// a minute. A denial is kept shorter, so a newly granted scraper is let in soon.
	allowedFor = time.Minute
	deniedFor  = 10 * time.Second
	// reviewTimeout bounds each review, so a slow API server fails a scrape rather
	// than piling up scrapes.
	reviewTimeout = 10 * time.Second
	// maxCached bounds the decisions kept; past it they are all forgotten.
	maxCached = 1024
)

// Reviewer decides whether a bearer token may use a verb on a path.
type Reviewer interface {
	// Review returns whether the token is authenticated and, if so, allowed.
	Review(ctx context.Context, token, verb, path string) (authenticated, allowed bool, err error)
}

// Filter returns the metrics server's filter provider, reviewing through the API
// server of cfg.
func Filter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	// JSON, which every API server (and the unit test's stand-in) speaks, whatever
	// encoding client-go would prefer by default.
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	// Only the two review clients: the whole clientset would link every typed client.
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	guard := NewGuard(apiReviewer{authn: authn, authz: authz}, time.Now)
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return guard.Wrap(log, next), nil
	}, nil
}

// Guard caches the reviews of a Reviewer.
type Guard struct {
	reviewer Reviewer
	now      func() time.Time

	mu        sync.Mutex
	decisions map[[sha256.Size]byte]decision
}

type decision struct {
	authenticated, allowed bool
	until                  time.Time
}

// NewGuard returns a Guard asking reviewer, with now as its clock.
func NewGuard(reviewer Reviewer, now func() time.Time) *Guard {
	return &Guard{reviewer: reviewer, now: now, decisions: map[[sha256.Size]byte]decision{}}
}

// Wrap returns next behind the check: 401 without a valid token, 403 without the
// permission, 500 when the API server cannot say.
func (g *Guard) Wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearer(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		authenticated, allowed, err := g.decide(req.Context(), token, strings.ToLower(req.Method), req.URL.Path)
		switch {
		case err != nil:
			log.Error(err, "Reviewing a metrics request")
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
		case !authenticated:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case !allowed:
			http.Error(w, "Forbidden", http.StatusForbidden)
		default:
			next.ServeHTTP(w, req)
		}
	})
}

func (g *Guard) decide(ctx context.Context, token, verb, path string) (authenticated, allowed bool, err error) {
	// Keyed by a hash: the cache never holds a token.
	key := sha256.Sum256([]byte(verb + " " + path + " " + token))
	now := g.now()
	g.mu.Lock()
	d, ok := g.decisions[key]
	g.mu.Unlock()
	if ok && now.Before(d.until) {
		return d.authenticated, d.allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	authenticated, allowed, err = g.reviewer.Review(ctx, token, verb, path)
	if err != nil {
		return false, false, err
	}
	d = decision{authenticated: authenticated, allowed: allowed, until: now.Add(deniedFor)}
	if allowed {
		d.until = now.Add(allowedFor)
	}
	g.mu.Lock()
	if len(g.decisions) >= maxCached {
		clear(g.decisions)
	}
	g.decisions[key] = d
	g.mu.Unlock()
	return authenticated, allowed, nil
}

// bearer returns the request's bearer token.
func bearer(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// apiReviewer asks the API server.
type apiReviewer struct {
	authn authenticationv1client.AuthenticationV1Interface
	authz authorizationv1client.AuthorizationV1Interface
}

func (a apiReviewer) Review(ctx context.Context, token, verb, path string) (bool, bool, error) {
	tr, err := a.authn.TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return false, false, err
	}
	if !tr.Status.Authenticated {
		return false, false, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.authz.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return true, false, err
	}
	return true, sar.Status.Allowed, nil
}
