//go:build integration

package devdatabase

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"orderly.dev/orderly/internal/testing/testenv"
)

// A DevDatabase's series go when it goes, and a DatabaseServer's per-server counters
// when the server goes: series of deleted objects do not pile up.
func metricSeriesGoWithTheirObjects(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "metered", s.Name, nil)
	waitReason(t, d, ReasonReady)
	object := map[string]string{"namespace": ns, "name": "metered"}
	server := map[string]string{"server": s.Name}
	g.Eventually(func(g Gomega) {
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_info", object)).To(Equal(1))
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_info", map[string]string{"namespace": ns, "name": "metered", "phase": "Ready"})).To(Equal(1))
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_created_total", server)).To(Equal(1))
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, d)).To(Succeed())
	waitGone(t, d)
	g.Eventually(func(g Gomega) {
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_info", object)).To(BeZero())
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_dropped_total", server)).To(Equal(1), "the server is still there")
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, s)).To(Succeed())
	waitGone(t, s)
	g.Eventually(func(g Gomega) {
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_created_total", server)).To(BeZero())
		g.Expect(testenv.SeriesOf(g, "orderly_devdatabase_dropped_total", server)).To(BeZero())
	}, timeout, poll).Should(Succeed())
}
