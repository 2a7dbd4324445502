package testenv

import (
	"strings"

	"github.com/onsi/gomega"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Series counts the series in controller-runtime's registry (what a manager's
// /metrics serves) of the metric called name whose labels include match. A name that
// ends in "*" matches every metric with that prefix.
func Series(name string, match map[string]string) (int, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	prefix, isPrefix := strings.CutSuffix(name, "*")
	n := 0
	for _, f := range families {
		if f.GetName() != name && (!isPrefix || !strings.HasPrefix(f.GetName(), prefix)) {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if got[k] != v {
					continue series
				}
			}
			n++
		}
	}
	return n, nil
}

// SeriesOf is Series for a Gomega assertion, failing g when the registry cannot be read.
func SeriesOf(g gomega.Gomega, name string, match map[string]string) int {
	n, err := Series(name, match)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return n
}
