//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/overview"
)

// TestKubectlPlugin: the binary installed as kubectl-orderly (what make
// install-plugin does) is found by kubectl, and `kubectl orderly status` shows a
// DevDatabase that cannot become Ready with the reason the controller gave, in
// text and in JSON.
func TestKubectlPlugin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	bins, err := devcluster.EnsureBinaries(ctx, os.Stderr)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.Symlink(managerBin, filepath.Join(dir, "kubectl-orderly"))).To(Succeed())
	kubectl := func(args ...string) (string, error) {
		// kubectl takes no flags before a plugin's name: the kubeconfig comes from the
		// environment, which kubectl passes on to the plugin.
		cmd := exec.Command(bins.Kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+devcluster.KubeconfigPath(clusterName))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("plugin", "list")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(filepath.Join(dir, "kubectl-orderly")))

	const ns = "e2e-plugin"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	g.Expect(k.Create(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: datav1alpha1.DevDatabaseSpec{ServerRef: "e2e-plugin-no-such-server"}})).To(Succeed())

	g.Eventually(func(g Gomega) {
		out, err := kubectl("orderly", "status", "-n", ns)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("DevDatabases: 1, 1 not ready"))
		g.Expect(out).To(MatchRegexp(`(?m)^  e2e-plugin/app: not ready \([A-Za-z]+\): .*e2e-plugin-no-such-server`))
	}, timeout, poll).Should(Succeed())

	out, err = kubectl("orderly", "status", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var ov overview.Overview
	g.Expect(json.Unmarshal([]byte(out), &ov)).To(Succeed(), out)
	var found bool
	for _, s := range ov.Sections {
		if s.Kind == "DevDatabase" {
			found = true
			g.Expect(s.Total).To(Equal(1))
			g.Expect(s.Attention).To(HaveLen(1))
			g.Expect(s.Attention[0].Name).To(Equal("app"))
		}
	}
	g.Expect(found).To(BeTrue(), out)

	// A day-2 verb's machine output, through kubectl: stdout is the JSON alone (the
	// warning about the missing DatabaseServer goes to stderr), and it says what the
	// DevDatabase now says.
	cmd := exec.Command(bins.Kubectl, "orderly", "db", "extend", "app", "-n", ns, "--by", "2h", "-o", "json")
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+devcluster.KubeconfigPath(clusterName))
	stdout, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), string(stdout))
	var ext struct {
		Namespace, Name, TTL string
		ExpiresAt            time.Time
		ServerMissing        bool
	}
	g.Expect(json.Unmarshal(stdout, &ext)).To(Succeed(), string(stdout))
	var db datav1alpha1.DevDatabase
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &db)).To(Succeed())
	g.Expect(ext.Namespace).To(Equal(ns))
	g.Expect(ext.Name).To(Equal("app"))
	g.Expect(ext.TTL).To(Equal(db.Spec.TTL.Duration.String()))
	g.Expect(ext.ExpiresAt).To(BeTemporally("==", db.CreationTimestamp.Add(db.Spec.TTL.Duration)))
	g.Expect(ext.ServerMissing).To(BeTrue())

	// Help names the plugin the way it is typed.
	out, err = kubectl("orderly", "status", "--help")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("kubectl orderly status [flags]"))
	g.Expect(strings.Count(out, "Usage:")).To(Equal(1))
}
