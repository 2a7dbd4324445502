package placement

import (
	"strings"
	"testing"
)

// FuzzRestConfigFrom reads any bytes as a member cluster's kubeconfig Secret.
// Properties: a refusal is an error with a message; an accepted kubeconfig gives a
// client that runs no plugin and reads no file of the manager's (no exec plugin, no
// auth provider, no token, certificate, key or CA file), with Orderly's timeout.
func FuzzRestConfigFrom(f *testing.F) {
	const base = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    %s\nusers:\n- name: u\n  user:\n    %s\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	for _, s := range [][2]string{
		{"insecure-skip-tls-verify: true", "token: abc"},
		{"insecure-skip-tls-verify: true", "exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}"},
		{"insecure-skip-tls-verify: true", "tokenFile: /etc/passwd"},
		{"certificate-authority: /etc/ca.crt", "token: abc"},
		{"insecure-skip-tls-verify: true", "client-certificate: /etc/x.crt"},
		{"insecure-skip-tls-verify: true", "auth-provider: {name: oidc}"},
		{"proxy-url: http://127.0.0.1:1", "username: a\n    password: b"},
	} {
		f.Add([]byte(strings.Replace(strings.Replace(base, "%s", s[0], 1), "%s", s[1], 1)))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := restConfigFrom(raw, defaultTimings().RequestTimeout)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" ||
			cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" {
			t.Fatalf("an accepted kubeconfig runs a plugin or reads a file: %+v", cfg)
		}
		if cfg.Timeout != defaultTimings().RequestTimeout {
			t.Fatalf("timeout %s", cfg.Timeout)
		}
	})
}
