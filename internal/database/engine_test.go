package database

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func TestValidPassword(t *testing.T) {
	for _, tc := range []struct {
		password string
		want     bool
	}{
		{Password(), true},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZ", true},
		{"ABCDEFGHIJKLMNOPQRSTUVWXY", false},       // too short
		{"abcdefghijklmnopqrstuvwxyz", false},      // not the alphabet
		{"ABCDEFGHIJKLMNOPQRSTUVWXY1", false},      // 1 is not base32
		{"ABCDEFGHIJKLM'; DROP ROLE x; --", false}, // whatever someone wrote into the Secret
		{"", false},
	} {
		if got := ValidPassword(tc.password); got != tc.want {
			t.Errorf("ValidPassword(%q) = %v, want %v", tc.password, got, tc.want)
		}
	}
}

func TestEffectiveSSLMode(t *testing.T) {
	for _, tc := range []struct {
		server Server
		want   string
	}{
		{Server{}, "prefer"},
		{Server{SSLMode: "disable"}, "disable"},
		{Server{CACert: []byte("pem")}, "verify-full"},
		{Server{SSLMode: "verify-full", CACert: []byte("pem")}, "verify-full"},
	} {
		if got := tc.server.EffectiveSSLMode(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.server, got, tc.want)
		}
	}
}

// A DatabaseServer that names a Secret in another namespace gets nothing read:
// whoever may create DatabaseServers cannot have Orderly fetch team-a's Secret and
// send it to a host of their choosing.
func TestServerForReadsOnlyFromTheManagersNamespace(t *testing.T) {
	ctx := context.Background()
	secret := func(ns, name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	creds := map[string]string{"username": "admin", "password": "s3cret"}
	var reads []string
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(secret("team-a", "db", creds), secret("orderly-system", "pg-admin", creds), secret("orderly-system", "pg-ca", map[string]string{CAKey: "not a certificate"})).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads = append(reads, key.String())
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	server := func(ref datav1alpha1.SecretReference, ca *datav1alpha1.SecretReference) *datav1alpha1.DatabaseServer {
		return &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: datav1alpha1.DatabaseServerSpec{
			Host: "attacker.example", AdminCredentialsSecretRef: ref, CASecretRef: ca}}
	}
	for _, tc := range []struct {
		name      string
		server    *datav1alpha1.DatabaseServer
		namespace string
		wantErr   error
		wantReads []string
	}{
		{name: "another namespace", server: server(datav1alpha1.SecretReference{Namespace: "team-a", Name: "db"}, nil), namespace: "orderly-system",
			wantErr: ErrCredentialsNotAllowed},
		{name: "CA from another namespace", server: server(datav1alpha1.SecretReference{Name: "pg-admin"}, &datav1alpha1.SecretReference{Namespace: "team-a", Name: "db"}),
			namespace: "orderly-system", wantErr: ErrCredentialsNotAllowed, wantReads: []string{"orderly-system/pg-admin"}},
		{name: "manager's namespace unknown", server: server(datav1alpha1.SecretReference{Name: "pg-admin"}, nil), wantErr: ErrCredentialsNotAllowed},
		{name: "the manager's namespace", server: server(datav1alpha1.SecretReference{Namespace: "orderly-system", Name: "pg-admin"}, nil), namespace: "orderly-system",
			wantReads: []string{"orderly-system/pg-admin"}},
		{name: "namespace unset: the manager's", server: server(datav1alpha1.SecretReference{Name: "pg-admin"}, nil), namespace: "orderly-system",
			wantReads: []string{"orderly-system/pg-admin"}},
		{name: "a CA Secret without a certificate", server: server(datav1alpha1.SecretReference{Name: "pg-admin"}, &datav1alpha1.SecretReference{Name: "pg-ca"}),
			namespace: "orderly-system", wantErr: ErrCredentials, wantReads: []string{"orderly-system/pg-admin", "orderly-system/pg-ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads = nil
			srv, err := ServerFor(ctx, c, tc.server, tc.namespace)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if strings.Join(reads, ",") != strings.Join(tc.wantReads, ",") {
				t.Errorf("read %v, want %v", reads, tc.wantReads)
			}
			if tc.wantErr == nil && (srv.Username != "admin" || srv.Password != "s3cret" || srv.Host != "attacker.example" || srv.Port != 5432) {
				t.Errorf("server = %+v", srv)
			}
			if tc.wantErr != nil && err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// A user's role is derived from the owner's UID and the user's name alone, never
// collides with the main role or another user's, and fits PostgreSQL's 63 bytes.
func TestUserRole(t *testing.T) {
	const uid = "5296E397-1234-4abc-8def-0123456789ab"
	_, main := Names(uid)
	a, b := UserRole(uid, "app-writer"), UserRole(uid, "reader")
	if a != main+"_app_writer" || b != main+"_reader" || a == b || a == main {
		t.Fatalf("UserRole: %q, %q (main %q)", a, b, main)
	}
	if UserRole(uid, "reader") != b {
		t.Fatal("UserRole is not deterministic")
	}
	if long := UserRole(uid, "abcdefghijklmnop"); len(long) > 63 {
		t.Fatalf("%q is %d bytes", long, len(long))
	}
}

func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		refused   bool
	}{
		{"", "1", false}, {"1", "", false}, {"1", "1", false}, {"1", "2", true},
	} {
		if err := SameServer(tc.want, tc.got); (err != nil) != tc.refused || (tc.refused && !errors.Is(err, ErrServerChanged)) {
			t.Errorf("SameServer(%q, %q) = %v", tc.want, tc.got, err)
		}
	}
}
