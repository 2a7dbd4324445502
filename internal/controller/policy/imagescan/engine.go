package imagescan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// Engine is the scanning engine as the controller uses it: resolving tags to
// digests over the OCI distribution API and scanning a digest. FromScanner adapts
// internal/imagescan's Scanner; unit tests use a fake.
type Engine interface {
	// Resolve returns the digest a repository:tag points at.
	Resolve(ctx context.Context, ref string, kc authn.Keychain) (string, error)
	// Scan pulls repository@digest and matches its packages against the database.
	Scan(ctx context.Context, ref string, kc authn.Keychain) (*Result, error)
	// DBVersion is the version of the vulnerability database loaded now.
	DBVersion() string
	// ReloadDB loads the database again from its directory; changed says whether
	// its version changed.
	ReloadDB() (changed bool, err error)
	// Scanner names the scanner and its version.
	Scanner() policyv1alpha1.ScannerInfo
	// Reason is the reason of a Resolve or Scan error: RegistryUnreachable,
	// AuthFailed, NotFound, UnsupportedMediaType, TooLarge, DatabaseMissing or
	// ScanFailed.
	Reason(err error) string
}

// Result is what a scan found.
type Result struct {
	DBVersion string
	Packages  int
	Counts    map[policyv1alpha1.Severity]int
	Findings  []Finding
}

// Finding is one vulnerability of one package.
type Finding struct {
	ID        string
	Aliases   []string
	Package   string
	Installed string
	Fixed     string
	Severity  policyv1alpha1.Severity
}

// Rank orders severities, the worst highest.
func Rank(s policyv1alpha1.Severity) int {
	switch s {
	case policyv1alpha1.SeverityCritical:
		return 4
	case policyv1alpha1.SeverityHigh:
		return 3
	case policyv1alpha1.SeverityMedium:
		return 2
	case policyv1alpha1.SeverityLow:
		return 1
	}
	return 0
}

// DisplayID is the ID people know a finding by: the record's own ID when it is a
// CVE, else its first CVE alias, else the record's ID (e.g. a GHSA).
func (f Finding) DisplayID() string {
	if strings.HasPrefix(f.ID, "CVE-") {
		return f.ID
	}
	for _, a := range f.Aliases {
		if strings.HasPrefix(a, "CVE-") {
			return a
		}
	}
	return f.ID
}

// dockerConfigKeychain serves the credentials of a kubernetes.io/dockerconfigjson
// Secret, by registry host; anonymous for the others.
type dockerConfigKeychain struct {
	auths map[string]authn.AuthConfig
}

// ParseDockerConfig reads a .dockerconfigjson (or legacy .dockercfg) document.
func ParseDockerConfig(data []byte) (authn.Keychain, error) {
	var cfg struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("reading docker config: %w", err)
	}
	if cfg.Auths == nil {
		var legacy map[string]authn.AuthConfig
		if err := json.Unmarshal(data, &legacy); err != nil {
			return nil, fmt.Errorf("reading docker config: %w", err)
		}
		cfg.Auths = legacy
	}
	k := &dockerConfigKeychain{auths: map[string]authn.AuthConfig{}}
	for host, a := range cfg.Auths {
		h := strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
		h, _, _ = strings.Cut(h, "/")
		if h == "docker.io" || h == "registry-1.docker.io" {
			h = "index.docker.io"
		}
		k.auths[h] = a
	}
	return k, nil
}

func (k *dockerConfigKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if a, ok := k.auths[r.RegistryStr()]; ok {
		return authn.FromConfig(a), nil
	}
	return authn.Anonymous, nil
}

// ReasonDatabaseMissing is the reason of every scan of an Unavailable engine.
const ReasonDatabaseMissing = "DatabaseMissing"

// Unavailable is the engine of a manager whose scanning engine could not start: every
// resolve and scan fails with DatabaseMissing and the cause, so that ImageScans
// and ImagePolicy status say why nothing is scanned (and nothing counts as clean).
type Unavailable struct{ Err error }

func (u Unavailable) Resolve(context.Context, string, authn.Keychain) (string, error) {
	return "", u.Err
}
func (u Unavailable) Scan(context.Context, string, authn.Keychain) (*Result, error) {
	return nil, u.Err
}
func (u Unavailable) DBVersion() string       { return "" }
func (u Unavailable) ReloadDB() (bool, error) { return false, u.Err }
func (u Unavailable) Reason(error) string     { return ReasonDatabaseMissing }
func (u Unavailable) Scanner() policyv1alpha1.ScannerInfo {
	return policyv1alpha1.ScannerInfo{Name: "none", Version: "none"}
}
