package devdatabase

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func TestExtend(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	server := func(maxTTL time.Duration) *datav1alpha1.DatabaseServer {
		return &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: datav1alpha1.DatabaseServerSpec{MaxTTL: metav1.Duration{Duration: maxTTL}}}
	}
	// serverErr makes every read of a DatabaseServer fail with err.
	serverErr := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*datav1alpha1.DatabaseServer); ok {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: datav1alpha1.GroupVersion.Group, Resource: "databaseservers"}, "pg", nil)
	for _, tc := range []struct {
		name              string
		ttl, by           time.Duration
		now               time.Time
		server            *datav1alpha1.DatabaseServer
		intercept         interceptor.Funcs
		wantTTL           time.Duration
		wantServerMissing bool
		wantErr           string
	}{
		{name: "before expiry: from the current expiry", ttl: 24 * time.Hour, by: 24 * time.Hour, now: created.Add(time.Hour),
			server: server(72 * time.Hour), wantTTL: 48 * time.Hour},
		{name: "after expiry: from now", ttl: time.Hour, by: 2 * time.Hour, now: created.Add(5 * time.Hour),
			server: server(72 * time.Hour), wantTTL: 7 * time.Hour},
		{name: "no maxTTL on the server", ttl: 24 * time.Hour, by: 1000 * time.Hour, now: created,
			server: server(0), wantTTL: 1024 * time.Hour},
		{name: "beyond maxTTL: refused, with the latest possible expiry", ttl: 24 * time.Hour, by: 72 * time.Hour, now: created.Add(time.Hour),
			server: server(72 * time.Hour), wantErr: "maxTTL of 72h0m0s; the latest possible expiry is 2026-01-04T00:00:00Z"},
		{name: "server missing: extended, and said", ttl: 24 * time.Hour, by: 24 * time.Hour, now: created,
			wantTTL: 48 * time.Hour, wantServerMissing: true},
		{name: "server not readable: refused, not skipped", ttl: 24 * time.Hour, by: 72 * time.Hour, now: created,
			server: server(48 * time.Hour), intercept: serverErr(forbidden), wantErr: "needs get on databaseservers"},
		{name: "server read fails otherwise: refused", ttl: 24 * time.Hour, by: time.Hour, now: created,
			server: server(48 * time.Hour), intercept: serverErr(apierrors.NewServiceUnavailable("etcd is sad")), wantErr: "to check its maxTTL"},
		{name: "not positive", ttl: 24 * time.Hour, by: -time.Hour, now: created, server: server(48 * time.Hour), wantErr: "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := devDB(tc.ttl, created)
			objs := []client.Object{d}
			if tc.server != nil {
				objs = append(objs, tc.server)
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(tc.intercept).Build()
			ctx := context.Background()
			ext, err := Extend(ctx, c, client.ObjectKeyFromObject(d), tc.by, tc.now)

			var got datav1alpha1.DevDatabase
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(d), &got); gerr != nil {
				t.Fatal(gerr)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if got.Spec.TTL.Duration != tc.ttl {
					t.Errorf("ttl = %s after a refused extension, want it unchanged (%s)", got.Spec.TTL.Duration, tc.ttl)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.TTL.Duration != tc.wantTTL {
				t.Errorf("ttl = %s, want %s", got.Spec.TTL.Duration, tc.wantTTL)
			}
			if want := created.Add(tc.wantTTL); !ext.ExpiresAt.Equal(want) || !ext.ExpiresAt.Equal(expiresAt(&got)) {
				t.Errorf("expiresAt = %s, want %s (as the controller computes it: %s)", ext.ExpiresAt, want, expiresAt(&got))
			}
			if ext.ServerMissing != tc.wantServerMissing {
				t.Errorf("serverMissing = %v, want %v", ext.ServerMissing, tc.wantServerMissing)
			}
		})
	}
}

// An extension computed from a copy that someone changed meanwhile is not written
// over the change: it is computed again from the changed object.
func TestExtendDoesNotOverwriteAConcurrentChange(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := devDB(24*time.Hour, created)
	raced := false
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(d).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if !raced {
				// Someone else sets another ttl between Extend's read and its write.
				raced = true
				var other datav1alpha1.DevDatabase
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &other); err != nil {
					return err
				}
				other.Spec.TTL = metav1.Duration{Duration: 30 * time.Hour}
				if err := c.Update(ctx, &other); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	ctx := context.Background()
	ext, err := Extend(ctx, c, client.ObjectKeyFromObject(d), 24*time.Hour, created)
	if err != nil {
		t.Fatalf("err = %v, want the extension retried after the conflict", err)
	}
	var got datav1alpha1.DevDatabase
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	// 30h set concurrently, then extended by 24h from that expiry.
	if got.Spec.TTL.Duration != 54*time.Hour || ext.TTL != 54*time.Hour {
		t.Errorf("ttl = %s (returned %s), want 54h: the concurrent 30h extended by 24h", got.Spec.TTL.Duration, ext.TTL)
	}
}
