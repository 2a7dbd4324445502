//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"orderly.dev/orderly/internal/testing/testenv"
)

// metricsReaderRole is the ClusterRole orderly-metrics-reader as config/manager/manager.yaml ships it.
func metricsReaderRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &role); err == nil && role.Kind == "ClusterRole" && role.Name == "orderly-metrics-reader" {
			return &role
		}
	}
	t.Fatal("config/manager/manager.yaml has no ClusterRole orderly-metrics-reader")
	return nil
}

// saToken creates a ServiceAccount in ns and returns a token of it.
func saToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	_, err := clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	tok, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tok.Status.Token
}

// TestSecureMetrics runs the manager with --metrics-secure, as config/manager/manager.yaml
// does, under the RBAC generated into config/rbac: metrics are served over HTTPS to a
// ServiceAccount bound to the shipped orderly-metrics-reader ClusterRole, and refused
// to one that is not and to a request without a token.
func TestSecureMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restartManager(t, "--metrics-secure")
	url := strings.Replace(metricsURL, "http://", "https://", 1)

	createNamespace(t, "e2e-metrics", nil)
	role := metricsReaderRole(t)
	g.Expect(k.Create(ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), role) })
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "e2e-metrics", Name: "prometheus"}},
	}
	g.Expect(k.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), binding) })
	reader := saToken(t, "e2e-metrics", "prometheus")
	nobody := saToken(t, "e2e-metrics", "nobody")

	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, url, http.NoBody)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // self-signed
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	g.Eventually(func(g Gomega) {
		code, body, err := scrape(reader)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
	}, timeout, poll).Should(Succeed())
	for token, want := range map[string]int{"": http.StatusUnauthorized, nobody: http.StatusForbidden} {
		code, body, err := scrape(token)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(want), body)
		g.Expect(body).NotTo(ContainSubstring("controller_runtime_reconcile_total"))
	}
}
