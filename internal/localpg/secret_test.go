package localpg

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/scheme"
)

func TestWriteAdminSecret(t *testing.T) {
	key := client.ObjectKey{Namespace: "dev", Name: "postgres-admin"}
	ours := map[string]string{labels.ManagedBy: labels.ManagedByValue, "team": "platform"}
	for _, tc := range []struct {
		name         string
		existing     *corev1.Secret
		wantErr      string
		wantPassword string
		wantLabels   map[string]string
	}{
		{name: "created with its namespace", wantPassword: "new", wantLabels: map[string]string{labels.ManagedBy: labels.ManagedByValue}},
		{name: "Orderly's is updated, its other labels kept",
			existing:     &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: ours}, Data: map[string][]byte{"password": []byte("old")}},
			wantPassword: "new", wantLabels: ours},
		{name: "someone else's is left alone",
			existing: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string][]byte{"password": []byte("real")}},
			wantErr:  "Orderly did not create it", wantPassword: "real"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.New())
			if tc.existing != nil {
				b = b.WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}, tc.existing)
			}
			c := b.Build()
			ctx := context.Background()
			err := WriteAdminSecret(ctx, c, key, "new")
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var sec corev1.Secret
			if err := c.Get(ctx, key, &sec); err != nil {
				t.Fatal(err)
			}
			if got := string(sec.Data["password"]); got != tc.wantPassword {
				t.Errorf("password = %q, want %q", got, tc.wantPassword)
			}
			if tc.wantErr != "" {
				return
			}
			if got := string(sec.Data["username"]); got != Admin {
				t.Errorf("username = %q, want %q", got, Admin)
			}
			if len(sec.Labels) != len(tc.wantLabels) {
				t.Errorf("labels = %v, want %v", sec.Labels, tc.wantLabels)
			}
			for k, v := range tc.wantLabels {
				if sec.Labels[k] != v {
					t.Errorf("labels = %v, want %v", sec.Labels, tc.wantLabels)
				}
			}
		})
	}
}
