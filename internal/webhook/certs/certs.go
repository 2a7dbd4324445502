// Package certs gives Orderly's webhook server a TLS serving certificate that Orderly
// manages itself: a private CA and a serving certificate signed by it, kept in one
// Secret so that every replica serves the same certificate, renewed before it
// expires. The CA certificate is what the webhook configurations carry as caBundle.
// Clusters with cert-manager use files instead (see FileCA).
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

// Keys of the Secret, beside the standard tls.crt and tls.key.
const (
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
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
)

// bundle is the decoded content of the Secret.
type bundle struct {
	caPEM, caKeyPEM, certPEM, keyPEM []byte
	ca, leaf                         *x509.Certificate
	pair                             tls.Certificate
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

// CABundle is the PEM CA certificate that signs the serving certificate.
func (m *Manager) CABundle() ([]byte, error) {
	b := m.current.Load()
	if b == nil {
		return nil, errors.New("the webhook's CA certificate is not loaded yet")
	}
	return b.caPEM, nil
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
		if decodeErr == nil && !m.due(b) {
			if prev := m.current.Load(); prev != nil && !bytes.Equal(prev.certPEM, b.certPEM) {
				log.FromContext(ctx).Info("Loaded the webhook's serving certificate renewed by another replica", "secret", m.Namespace+"/"+m.Name,
					"notAfter", b.leaf.NotAfter, "newCA", !bytes.Equal(prev.caPEM, b.caPEM))
			}
			m.current.Store(b)
			return nil
		}
		var keep *bundle
		if decodeErr == nil && m.now().Add(caRenewBefore).Before(b.ca.NotAfter) {
			keep = b // only the serving certificate is due: keep the CA, so caBundle stays valid
		}
		nb, err := m.issue(keep)
		if err != nil {
			return err
		}
		s.Data = nb.data()
		if err := m.Client.Update(ctx, &s); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return fmt.Errorf("renewing the certificate in Secret %s/%s: %w", m.Namespace, m.Name, err)
		}
		log.FromContext(ctx).Info("Renewed the webhook's serving certificate", "secret", m.Namespace+"/"+m.Name, "notAfter", nb.leaf.NotAfter, "newCA", keep == nil)
		m.current.Store(nb)
		return nil
	}
	return fmt.Errorf("secret %s/%s keeps changing under Orderly; try again", m.Namespace, m.Name)
}

// due says whether b must be replaced: near its end, or not for the names it must serve.
func (m *Manager) due(b *bundle) bool {
	now := m.now()
	if now.After(b.leaf.NotBefore.Add(leafRenewAfter)) || now.Add(caRenewBefore).After(b.ca.NotAfter) {
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

// issue signs a new serving certificate with keep's CA, or with a new CA when keep is nil.
func (m *Manager) issue(keep *bundle) (*bundle, error) {
	now := m.now()
	b := &bundle{}
	var caKey *ecdsa.PrivateKey
	if keep != nil {
		b.ca, b.caPEM, b.caKeyPEM = keep.ca, keep.caPEM, keep.caKeyPEM
		k, err := parseKey(keep.caKeyPEM)
		if err != nil {
			return nil, err
		}
		caKey = k
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		caKey = k
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "orderly-webhook-ca", Organization: []string{"Orderly"}},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(caLifetime),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			return nil, err
		}
		if b.ca, err = x509.ParseCertificate(der); err != nil {
			return nil, err
		}
		b.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if b.caKeyPEM, err = encodeKey(k); err != nil {
			return nil, err
		}
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
		NotBefore:    now.Add(-time.Hour),
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

func (b *bundle) data() map[string][]byte {
	return map[string][]byte{
		KeyCACert:               b.caPEM,
		KeyCAKey:                b.caKeyPEM,
		corev1.TLSCertKey:       b.certPEM,
		corev1.TLSPrivateKeyKey: b.keyPEM,
	}
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
