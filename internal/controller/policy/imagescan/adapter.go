package imagescan

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	engine "orderly.dev/orderly/internal/imagescan"
)

// FromScanner is the Engine of internal/imagescan's Scanner (osv-scalibr extraction,
// local OSV matching, go-containerregistry).
func FromScanner(s *engine.Scanner) Engine { return scannerEngine{s} }

type scannerEngine struct{ s *engine.Scanner }

func (e scannerEngine) Resolve(ctx context.Context, ref string, kc authn.Keychain) (string, error) {
	return e.s.Resolve(ctx, ref, kc)
}

func (e scannerEngine) Scan(ctx context.Context, ref string, kc authn.Keychain) (*Result, error) {
	r, err := e.s.Scan(ctx, ref, kc)
	if err != nil {
		return nil, err
	}
	out := &Result{DBVersion: r.DBVersion, Packages: r.Packages, Counts: map[policyv1alpha1.Severity]int{}}
	for sev, n := range r.Counts {
		out.Counts[policyv1alpha1.Severity(sev)] += n
	}
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, Finding{ID: f.ID, Aliases: f.Aliases, Package: f.Package, Installed: f.Installed, Fixed: f.Fixed, Severity: policyv1alpha1.Severity(f.Severity)})
	}
	return out, nil
}

func (e scannerEngine) DBVersion() string       { return e.s.DBVersion() }
func (e scannerEngine) ReloadDB() (bool, error) { return e.s.ReloadDB() }
func (e scannerEngine) Reason(err error) string { return engine.ReasonOf(err) }
func (e scannerEngine) Scanner() policyv1alpha1.ScannerInfo {
	return policyv1alpha1.ScannerInfo{Name: engine.ScannerName, Version: engine.ScannerVersion()}
}
