package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// tokens is a Reviewer that knows some tokens, and counts its reviews.
type tokens struct {
	allowed map[string]bool // token -> may get /metrics
	fail    bool
	reviews int
}

func (t *tokens) Review(_ context.Context, token, verb, path string) (bool, bool, error) {
	t.reviews++
	if t.fail {
		return false, false, errors.New("API server down")
	}
	may, known := t.allowed[token]
	return known, known && may && verb == "get" && path == "/metrics", nil
}

func TestGuard(t *testing.T) {
	now := time.Unix(0, 0)
	reviewer := &tokens{allowed: map[string]bool{"reader": true, "nobody": false}}
	g := NewGuard(reviewer, func() time.Time { return now })
	h := g.Wrap(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	get := func(auth string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Basic reader", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer stranger", http.StatusUnauthorized},
		{"Bearer nobody", http.StatusForbidden},
		{"Bearer reader", http.StatusOK},
		{"bearer reader", http.StatusOK},
	} {
		if got := get(tc.auth); got != tc.want {
			t.Errorf("Authorization %q: status %d, want %d", tc.auth, got, tc.want)
		}
	}

	// Decisions are reused for a while, then asked again.
	reviews := reviewer.reviews
	get("Bearer reader")
	if reviewer.reviews != reviews {
		t.Errorf("an allowed token was reviewed again within %s", allowedFor)
	}
	now = now.Add(allowedFor)
	get("Bearer reader")
	if reviewer.reviews != reviews+1 {
		t.Errorf("an allowed token was not reviewed again after %s", allowedFor)
	}

	// The API server cannot say: refused, and nothing cached.
	reviewer.fail = true
	now = now.Add(allowedFor)
	if got := get("Bearer reader"); got != http.StatusInternalServerError {
		t.Errorf("review failed: status %d, want 500", got)
	}
	reviewer.fail = false
	if got := get("Bearer reader"); got != http.StatusOK {
		t.Errorf("after the API server came back: status %d, want 200", got)
	}
}
