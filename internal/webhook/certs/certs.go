// Package certs gives Orderly's webhook server a TLS serving certificate that Orderly
// manages itself: a private CA and a serving certificate signed by it, kept in one
// Secret so that every replica serves the same certificate, renewed before it
// expires. The CA certificates are what the webhook configurations carry as caBundle.
// Clusters with cert-manager use files instead (see FileCA).
//
// A CA is replaced in two steps, so that no replica ever serves a certificate the
// configurations do not trust yet: when the CA enters its last year a next CA is
// staged (published in the caBundle beside the current one, signing nothing), and
// only once it has been published for CAStageFor does it sign the serving
// certificate; the CA it replaces stays in the caBundle until it expires, for the
// replicas that still serve its certificate until their next check. Only a deleted or
// unreadable Secret makes a new CA at once.
//
// Why not a library: controller-runtime's certwatcher serves files, and is what the
// manager uses when the certificate comes from cert-manager (--webhook-cert-dir). For a
// certificate Orderly issues itself, github.com/open-policy-agent/cert-controller (what
// Gatekeeper and KEDA use) does not fit three things users rely on here: it replaces an
// expiring CA and the serving certificate in one step, so replicas and webhook
// configurations meet a CA they do not trust yet until everything has caught up
// (TestCARotationIsStagedThroughTheCABundle shows the two steps that avoid it); it
// injects the caBundle into a fixed list of configurations named at start, while
// Orderly writes one per ImagePolicy and LabelPolicy at run time (their controllers
// take CABundle from here); and it writes the certificate to files, which the manager's
// read-only root filesystem does not allow (it serves from memory, GetCertificate).
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"orderly.dev/orderly/internal/labels"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update

// Keys of the Secret, beside the standard tls.crt and tls.key. ca.crt signed tls.crt;
// ca-next is the staged CA, ca-previous.crt the one ca.crt replaced.
const (
	KeyCACert         = "ca.crt"
	KeyCAKey          = "ca.key"
	KeyNextCACert     = "ca-next.crt"
	KeyNextCAKey      = "ca-next.key"
	KeyPreviousCACert = "ca-previous.crt"
)

// Lifetimes and when to renew.
const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	leafLifetime   = 365 * 24 * time.Hour
	leafRenewAfter = leafLifetime - 30*24*time.Hour
	caRenewBefore  = 365 * 24 * time.Hour
	// CheckInterval is how often every replica reads the Secret again and renews the
	// certificate when due. Another replica may have renewed the serving certificate
	// or re-issued the CA (after the Secret was deleted, say): the API server then
	// trusts the new CA once the leader has written it into the configurations, and a
	// replica still serving the old certificate fails every call until it reads the
	// Secret again. A GET a minute per replica keeps that window short.
	CheckInterval = time.Minute
	// CAStageFor is how long a next CA is published in the caBundle before it signs
	// the serving certificate: the leader reads the Secret within a CheckInterval and
	// writes the webhook configurations within another minute, so ten minutes leave
	// room for a slow API server.
	CAStageFor = 10 * time.Minute
	// backdate is how far before its creation a certificate's NotBefore lies (clock
	// skew between the API server and Orderly); a staged CA's age counts from its
	// NotBefore plus this.
	backdate = time.Hour
)

// bundle is the decoded content of the Secret.
type bundle struct {
	caPEM, caKeyPEM, certPEM, keyPEM []byte
	ca, leaf                         *x509.Certificate
	pair                             tls.Certificate
	// next is the staged CA (nil when none), previousPEM the CA that ca replaced.
	next                *x509.Certificate
	nextPEM, nextKeyPEM []byte
	previous            *x509.Certificate
	previousPEM         []byte
}

// Manager keeps the webhook's certificate in a Secret and serves it from memory.
type Manager struct {
	// Client writes the Secret; Reader reads it (straight from the API server: the
	// certificate is needed before the cache starts).
	Client client.Client
	Reader client.Reader
	// Namespace and Name of the Secret.
	Namespace, Name string
	// DNSNames and IPs the serving certificate is valid for.
	DNSNames []string
	IPs      []net.IP
	// Clock dates the certificates and decides when they are due; the wall clock
	// when nil. When it also makes tickers (a clock.WithTicker, as the fake clocks of
	// tests do), Start checks on its ticks.
	Clock clock.PassiveClock

	current atomic.Pointer[bundle]
}

func (m *Manager) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

// GetCertificate is tls.Config.GetCertificate for the webhook server.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	b := m.current.Load()
	if b == nil {
		return nil, errors.New("the webhook's serving certificate is not loaded yet")
	}
	return &b.pair, nil
}

// CABundle is the PEM CA certificates the webhook configurations must trust: the one
// that signs the serving certificate, a staged next one, and the one it replaced
// while that has not expired.
func (m *Manager) CABundle() ([]byte, error) {
	b := m.current.Load()
	if b == nil {
		return nil, errors.New("the webhook's CA certificate is not loaded yet")
	}
	return b.caBundle(m.now()), nil
}

func (b *bundle) caBundle(now time.Time) []byte {
	out := slices.Clone(b.caPEM)
	if b.next != nil {
		out = append(out, b.nextPEM...)
	}
	if b.previous != nil && now.Before(b.previous.NotAfter) {
		out = append(out, b.previousPEM...)
	}
	return out
}

// NeedLeaderElection: every replica serves the webhook, so every replica keeps its
// certificate current.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start re-checks the certificate every CheckInterval until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	var ticks clock.WithTicker = clock.RealClock{}
	if c, ok := m.Clock.(clock.WithTicker); ok {
		ticks = c
	}
	t := ticks.NewTicker(CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := m.Ensure(ctx); err != nil {
				log.FromContext(ctx).Error(err, "Renewing the webhook's serving certificate", "secret", m.Namespace+"/"+m.Name)
			}
		}
	}
}

// Ensure loads the certificate from the Secret, creating the Secret or renewing the
// certificate when that is due. A Secret of that name that Orderly did not create is
// never overwritten.
func (m *Manager) Ensure(ctx context.Context) error {
	for attempt := 0; attempt < 3; attempt++ {
		var s corev1.Secret
		err := m.Reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			b, err := m.issue(nil)
			if err != nil {
				return err
			}
			s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name,
				Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}, Type: corev1.SecretTypeTLS}
			s.Data = b.data()
			if err := m.Client.Create(ctx, &s); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue // another replica was first: use its certificate
				}
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("creating Secret %s/%s: namespace %s does not exist: create it, or run the manager with --leader-election-namespace set to its namespace", m.Namespace, m.Name, m.Namespace)
				}
				return fmt.Errorf("creating Secret %s/%s: %w", m.Namespace, m.Name, err)
			}
			m.current.Store(b)
			return nil
		case err != nil:
			return fmt.Errorf("reading Secret %s/%s: %w", m.Namespace, m.Name, err)
		}
		if s.Labels[labels.ManagedBy] != labels.ManagedByValue {
			return fmt.Errorf("secret %s/%s exists and was not created by Orderly: delete or rename it, or give the manager another --webhook-secret", m.Namespace, m.Name)
		}
		b, decodeErr := decode(s.Data)
		var nb *bundle
		var what string
		if decodeErr != nil {
			// Unreadable: start again with a new CA (the only case that cannot be staged).
			if nb, err = m.issue(nil); err != nil {
				return err
			}
			what = "issued a new CA and serving certificate (the Secret did not decode: " + decodeErr.Error() + ")"
		} else if nb, what, err = m.renew(b); err != nil {
			return err
		}
		if nb == nil {
			if prev := m.current.Load(); prev != nil && !bytes.Equal(prev.certPEM, b.certPEM) {
				log.FromContext(ctx).Info("Loaded the webhook's serving certificate renewed by another replica", "secret", m.Namespace+"/"+m.Name,
					"notAfter", b.leaf.NotAfter, "newCA", !bytes.Equal(prev.caPEM, b.caPEM))
			}
			m.current.Store(b)
			return nil
		}
		s.Data = nb.data()
		if err := m.Client.Update(ctx, &s); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return fmt.Errorf("renewing the certificate in Secret %s/%s: %w", m.Namespace, m.Name, err)
		}
		log.FromContext(ctx).Info("Renewed the webhook's certificates: "+what, "secret", m.Namespace+"/"+m.Name, "notAfter", nb.leaf.NotAfter, "caNotAfter", nb.ca.NotAfter)
		m.current.Store(nb)
		return nil
	}
	return fmt.Errorf("secret %s/%s keeps changing under Orderly; try again", m.Namespace, m.Name)
}

// renew returns what must replace b, and why, or nil when b is good as it is. The CA
// moves in two steps (see the package comment): stage a next CA, then, once it has
// been published for CAStageFor, sign with it.
func (m *Manager) renew(b *bundle) (*bundle, string, error) {
	now := m.now()
	caDue := now.Add(caRenewBefore).After(b.ca.NotAfter)
	switch {
	case !now.Before(b.ca.NotAfter):
		// Expired already (the cluster was off through the whole last year): nothing
		// trusts it any more, so there is nothing to stage for.
		nb, err := m.issue(nil)
		if err != nil {
			return nil, "", err
		}
		return nb, "the CA had expired: issued a new CA at once", nil
	case caDue && b.next == nil:
		nb := b.clone()
		var err error
		if nb.next, nb.nextPEM, nb.nextKeyPEM, err = m.newCA(); err != nil {
			return nil, "", err
		}
		if m.leafDue(b) {
			if nb, err = m.issue(nb); err != nil {
				return nil, "", err
			}
		}
		return nb, "staged a next CA in the caBundle; it signs from " + now.Add(CAStageFor).Format(time.RFC3339), nil
	case b.next != nil && !now.Before(b.next.NotBefore.Add(backdate+CAStageFor)):
		promoted := b.clone()
		promoted.previous, promoted.previousPEM = b.ca, b.caPEM
		promoted.ca, promoted.caPEM, promoted.caKeyPEM = b.next, b.nextPEM, b.nextKeyPEM
		promoted.next, promoted.nextPEM, promoted.nextKeyPEM = nil, nil, nil
		nb, err := m.issue(promoted)
		if err != nil {
			return nil, "", err
		}
		return nb, "the staged CA now signs the serving certificate; the old one stays in the caBundle until it expires", nil
	case m.leafDue(b):
		nb, err := m.issue(b)
		if err != nil {
			return nil, "", err
		}
		return nb, "new serving certificate from the same CA", nil
	}
	return nil, "", nil
}

// clone copies b's CA material (the certificate pair is reissued by issue).
func (b *bundle) clone() *bundle {
	c := *b
	return &c
}

// leafDue says whether b's serving certificate must be replaced: near its end, not
// for the names it must serve, or not signed by the CA that should sign it.
func (m *Manager) leafDue(b *bundle) bool {
	now := m.now()
	if now.After(b.leaf.NotBefore.Add(leafRenewAfter)) {
		return true
	}
	for _, n := range m.DNSNames {
		if !slices.Contains(b.leaf.DNSNames, n) {
			return true
		}
	}
	for _, ip := range m.IPs {
		if !slices.ContainsFunc(b.leaf.IPAddresses, ip.Equal) {
			return true
		}
	}
	return b.leaf.CheckSignatureFrom(b.ca) != nil
}

// issue signs a new serving certificate with keep's CA (keeping its staged and
// previous CAs), or with a new CA when keep is nil.
func (m *Manager) issue(keep *bundle) (*bundle, error) {
	now := m.now()
	b := &bundle{}
	if keep != nil {
		*b = *keep
	} else {
		var err error
		if b.ca, b.caPEM, b.caKeyPEM, err = m.newCA(); err != nil {
			return nil, err
		}
	}
	caKey, err := parseKey(b.caKeyPEM)
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cn := "orderly-webhook"
	if len(m.DNSNames) > 0 {
		cn = m.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Orderly"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     m.DNSNames,
		IPAddresses:  m.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	b.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if b.keyPEM, err = encodeKey(leafKey); err != nil {
		return nil, err
	}
	return decode(b.data())
}

// newCA makes a CA certificate and its key.
func (m *Manager) newCA() (*x509.Certificate, []byte, []byte, error) {
	now := m.now()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "orderly-webhook-ca", Organization: []string{"Orderly"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := encodeKey(k)
	if err != nil {
		return nil, nil, nil, err
	}
	return ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func (b *bundle) data() map[string][]byte {
	d := map[string][]byte{
		KeyCACert:               b.caPEM,
		KeyCAKey:                b.caKeyPEM,
		corev1.TLSCertKey:       b.certPEM,
		corev1.TLSPrivateKeyKey: b.keyPEM,
	}
	if b.next != nil {
		d[KeyNextCACert], d[KeyNextCAKey] = b.nextPEM, b.nextKeyPEM
	}
	if b.previous != nil {
		d[KeyPreviousCACert] = b.previousPEM
	}
	return d
}

func decode(d map[string][]byte) (*bundle, error) {
	b := &bundle{caPEM: d[KeyCACert], caKeyPEM: d[KeyCAKey], certPEM: d[corev1.TLSCertKey], keyPEM: d[corev1.TLSPrivateKeyKey]}
	var err error
	if b.ca, err = parseCert(b.caPEM); err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCACert, err)
	}
	if b.leaf, err = parseCert(b.certPEM); err != nil {
		return nil, fmt.Errorf("%s: %w", corev1.TLSCertKey, err)
	}
	if b.pair, err = tls.X509KeyPair(b.certPEM, b.keyPEM); err != nil {
		return nil, err
	}
	if _, err := parseKey(b.caKeyPEM); err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCAKey, err)
	}
	// A staged or previous CA that does not decode is dropped, not fatal: the next
	// renewal stages a new one.
	if len(d[KeyNextCACert]) > 0 {
		if next, err := parseCert(d[KeyNextCACert]); err == nil {
			if _, err := parseKey(d[KeyNextCAKey]); err == nil {
				b.next, b.nextPEM, b.nextKeyPEM = next, d[KeyNextCACert], d[KeyNextCAKey]
			}
		}
	}
	if prev, err := parseCert(d[KeyPreviousCACert]); err == nil {
		b.previous, b.previousPEM = prev, d[KeyPreviousCACert]
	}
	return b, nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(p)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func parseKey(p []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(p)
	if blk == nil {
		return nil, errors.New("no PEM key")
	}
	return x509.ParseECPrivateKey(blk.Bytes)
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// FileCA reads the CA bundle from a directory that holds a certificate issued by
// someone else, such as a mounted cert-manager Certificate Secret (ca.crt, tls.crt,
// tls.key); the webhook server watches tls.crt and tls.key itself.
type FileCA struct {
	Dir string
}

// CABundle reads Dir/ca.crt afresh, so that a renewal is picked up.
func (f FileCA) CABundle() ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(f.Dir, KeyCACert))
	if err != nil {
		return nil, fmt.Errorf("reading the webhook's CA bundle: %w", err)
	}
	if _, err := parseCert(bytes.TrimSpace(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(f.Dir, KeyCACert), err)
	}
	return b, nil
}
