package backupverification

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// Source is where backups come from, for sources whose bytes the manager can read
// (S3 is the one kind so far). A Source only reads. The volume, Velero and
// CloudNativePG kinds designed in docs/backupverification.md fit Latest but not
// Open (their bytes never reach the manager): they need the restore step behind
// this interface too, as the docs say.
type Source interface {
	// Latest returns the newest backup; errNoBackup when there is none.
	Latest(ctx context.Context) (Backup, error)
	// Open streams the backup's bytes. The caller closes it.
	Open(ctx context.Context, b Backup) (io.ReadCloser, error)
	// Checksum returns the backup's published SHA-256 (hex), or "" when none is published.
	Checksum(ctx context.Context, b Backup) (string, error)
}

// Backup is one backup a Source found.
type Backup struct {
	Key          string
	ETag         string
	Size         int64
	LastModified time.Time
}

// sourceError is a problem with the source, with the reason status gives it.
type sourceError struct {
	reason string
	msg    string
}

func (e *sourceError) Error() string { return e.msg }

// Reasons of source problems.
const (
	ReasonNoBackup          = "NoBackup"
	ReasonBucketNotFound    = "BucketNotFound"
	ReasonAccessDenied      = "AccessDenied"
	ReasonSourceUnreachable = "SourceUnreachable"
	ReasonCredentials       = "CredentialsUnavailable"
	ReasonInvalidSpec       = "InvalidSpec"
	// ReasonCertificateNotTrusted: the store's TLS certificate is not one the CA
	// given (or, without one, the system's roots) vouches for. Told apart from
	// SourceUnreachable because waiting does not fix it: the CA Secret or the store's
	// certificate must change (the backoff's next retry picks that up).
	ReasonCertificateNotTrusted = "CertificateNotTrusted"
)

// s3Timeout bounds each S3 call but the streaming read, which the restore's
// deadline bounds.
const s3Timeout = 30 * time.Second

// checksumSuffix names the object holding a dump's SHA-256.
const checksumSuffix = ".sha256"

// maxChecksumBytes is the most of a .sha256 object read: sha256sum writes 64 hex
// digits, two spaces and the file name.
const maxChecksumBytes = 4096

type s3Source struct {
	client  *s3.Client
	bucket  string
	prefix  string
	pattern *regexp.Regexp
	// caSecret names the CA Secret the store's certificate is checked against; ""
	// when the system's roots are used.
	caSecret string
}

// s3Credentials are read from the object's own namespace only.
type s3Credentials struct {
	accessKey, secretKey, sessionToken string
	ca                                 []byte
}

// readS3Credentials reads the credentials (and CA) Secrets in namespace ns.
func readS3Credentials(ctx context.Context, reader client.Reader, ns string, src *datav1alpha1.S3BackupSource) (s3Credentials, error) {
	var out s3Credentials
	var sec corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.CredentialsSecretRef.Name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return out, &sourceError{ReasonCredentials, fmt.Sprintf("the credentials Secret %s does not exist in this namespace", src.CredentialsSecretRef.Name)}
		}
		return out, fmt.Errorf("reading the credentials Secret: %w", err)
	}
	out.accessKey = string(sec.Data[datav1alpha1.S3AccessKeyIDKey])
	out.secretKey = string(sec.Data[datav1alpha1.S3SecretAccessKeyKey])
	out.sessionToken = string(sec.Data[datav1alpha1.S3SessionTokenKey])
	if out.accessKey == "" || out.secretKey == "" {
		return out, &sourceError{ReasonCredentials, fmt.Sprintf("the credentials Secret %s needs the keys %s and %s", src.CredentialsSecretRef.Name, datav1alpha1.S3AccessKeyIDKey, datav1alpha1.S3SecretAccessKeyKey)}
	}
	if ref := src.CASecretRef; ref != nil {
		var ca corev1.Secret
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &ca); err != nil {
			if apierrors.IsNotFound(err) {
				return out, &sourceError{ReasonCredentials, fmt.Sprintf("the CA Secret %s does not exist in this namespace", ref.Name)}
			}
			return out, fmt.Errorf("reading the CA Secret: %w", err)
		}
		out.ca = ca.Data[datav1alpha1.CACertKey]
		if !x509.NewCertPool().AppendCertsFromPEM(out.ca) {
			return out, &sourceError{ReasonCredentials, fmt.Sprintf("the CA Secret %s needs the key %s with PEM certificates", ref.Name, datav1alpha1.CACertKey)}
		}
	}
	return out, nil
}

// newS3Source builds the S3 client of src: path-style, the credentials given, TLS
// verified against the CA when one is given.
func newS3Source(src *datav1alpha1.S3BackupSource, cred s3Credentials) (*s3Source, error) {
	pattern, err := compilePattern(src.KeyPattern)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = s3Timeout
	if len(cred.ca) > 0 {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(cred.ca)
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	region := cmp.Or(src.Region, "us-east-1")
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(strings.TrimSuffix(src.Endpoint, "/")),
		Region:       region,
		UsePathStyle: true,
		HTTPClient:   &http.Client{Transport: transport},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: cred.accessKey, SecretAccessKey: cred.secretKey, SessionToken: cred.sessionToken}, nil
		}),
		// Many S3-compatible stores do not implement the newer default checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	out := &s3Source{client: c, bucket: src.Bucket, prefix: src.Prefix, pattern: pattern}
	if src.CASecretRef != nil {
		out.caSecret = src.CASecretRef.Name
	}
	return out, nil
}

// compilePattern compiles spec.source.s3.keyPattern; nil when unset.
func compilePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, &sourceError{ReasonInvalidSpec, fmt.Sprintf("spec.source.s3.keyPattern does not compile: %v", err)}
	}
	return re, nil
}

// Latest lists the prefix and picks the newest dump.
func (s *s3Source) Latest(ctx context.Context) (Backup, error) {
	var all []Backup
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix)})
	for pages := 0; p.HasMorePages(); pages++ {
		if pages >= 100 {
			return Backup{}, &sourceError{ReasonInvalidSpec, fmt.Sprintf("more than 100000 objects under prefix %q: narrow spec.source.s3.prefix", s.prefix)}
		}
		cctx, cancel := context.WithTimeout(ctx, s3Timeout)
		page, err := p.NextPage(cctx)
		cancel()
		if err != nil {
			return Backup{}, s.classify(err, "listing")
		}
		for _, o := range page.Contents {
			all = append(all, Backup{Key: aws.ToString(o.Key), ETag: strings.Trim(aws.ToString(o.ETag), `"`), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	b, ok := newest(all, s.pattern)
	if !ok {
		return Backup{}, &sourceError{ReasonNoBackup, fmt.Sprintf("no backup under s3://%s/%s%s", s.bucket, s.prefix, patternNote(s.pattern))}
	}
	return b, nil
}

func patternNote(re *regexp.Regexp) string {
	if re == nil {
		return ""
	}
	return fmt.Sprintf(" matching %q", re.String())
}

// newest picks the newest dump among objects: those matching pattern (all but
// .sha256 files when nil), by the pattern's ts group when it has one, else by
// LastModified; ties go to the greater key, so the choice never depends on
// listing order.
func newest(objects []Backup, pattern *regexp.Regexp) (Backup, bool) {
	ts := -1
	if pattern != nil {
		ts = pattern.SubexpIndex("ts")
	}
	type cand struct {
		b  Backup
		ts string
	}
	var cs []cand
	for _, o := range objects {
		if strings.HasSuffix(o.Key, checksumSuffix) || strings.HasSuffix(o.Key, "/") {
			continue
		}
		c := cand{b: o}
		if pattern != nil {
			m := pattern.FindStringSubmatch(o.Key)
			if m == nil {
				continue
			}
			if ts >= 0 {
				c.ts = m[ts]
			}
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return Backup{}, false
	}
	best := slices.MaxFunc(cs, func(a, b cand) int {
		if ts >= 0 {
			if c := strings.Compare(a.ts, b.ts); c != 0 {
				return c
			}
		}
		if c := a.b.LastModified.Compare(b.b.LastModified); c != 0 {
			return c
		}
		return strings.Compare(a.b.Key, b.b.Key)
	})
	return best.b, true
}

// Open streams the object. The ETag read must be the one listed: a dump replaced
// between listing and reading is another backup.
func (s *s3Source) Open(ctx context.Context, b Backup) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(b.Key)}
	if b.ETag != "" {
		in.IfMatch = aws.String(`"` + b.ETag + `"`)
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s.classify(err, "reading "+b.Key)
	}
	return out.Body, nil
}

// Checksum reads <key>.sha256 when it exists.
func (s *s3Source) Checksum(ctx context.Context, b Backup) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, s3Timeout)
	defer cancel()
	out, err := s.client.GetObject(cctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(b.Key + checksumSuffix)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound") {
			return "", nil
		}
		return "", s.classify(err, "reading "+b.Key+checksumSuffix)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, maxChecksumBytes))
	if err != nil {
		return "", s.classify(err, "reading "+b.Key+checksumSuffix)
	}
	sum, err := parseChecksum(data)
	if err != nil {
		return "", &sourceError{"ChecksumUnreadable", fmt.Sprintf("%s%s: %v", b.Key, checksumSuffix, err)}
	}
	return sum, nil
}

// parseChecksum reads what sha256sum writes ("<64 hex>  <name>") or the bare digest.
func parseChecksum(data []byte) (string, error) {
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return "", errors.New("empty")
	}
	sum := strings.ToLower(fields[0])
	if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
		return "", errors.New("does not start with a SHA-256 in hex (64 hex digits)")
	}
	return sum, nil
}

// untrusted tells a TLS certificate the client refused from other connection errors,
// and says why it was refused.
func untrusted(err error) (string, bool) {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return "signed by an unknown authority", true
	case errors.As(err, &host):
		return host.Error(), true
	case errors.As(err, &invalid):
		return invalid.Error(), true
	case errors.As(err, &verify):
		return verify.Err.Error(), true
	}
	return "", false
}

// classify turns an S3 error into a reason and a message without the credentials.
func (s *s3Source) classify(err error, what string) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return &sourceError{ReasonBucketNotFound, fmt.Sprintf("bucket %s does not exist", s.bucket)}
		// XAdminUserNotFound is versitygw's InvalidAccessKeyId (with a 404).
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "InvalidToken", "ExpiredToken", "XAdminUserNotFound":
			return &sourceError{ReasonAccessDenied, fmt.Sprintf("%s in bucket %s: the store refused the credentials (%s); check the credentials Secret and that they may list and read the bucket", what, s.bucket, ae.ErrorCode())}
		case "PreconditionFailed":
			return &sourceError{"BackupChanged", fmt.Sprintf("%s: the object changed while it was being verified; the next run takes the new one", what)}
		}
		// Stores name refusals in their own words (versitygw: XAdminUserNotFound);
		// the status code says it plainly.
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && (re.HTTPStatusCode() == http.StatusForbidden || re.HTTPStatusCode() == http.StatusUnauthorized) {
			return &sourceError{ReasonAccessDenied, fmt.Sprintf("%s in bucket %s: the store refused the credentials (%s); check the credentials Secret and that they may list and read the bucket", what, s.bucket, ae.ErrorCode())}
		}
		return &sourceError{ReasonSourceUnreachable, fmt.Sprintf("%s in bucket %s: %s", what, s.bucket, ae.ErrorCode())}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &sourceError{ReasonSourceUnreachable, fmt.Sprintf("%s in bucket %s: the store did not answer in time", what, s.bucket)}
	}
	if msg, ok := untrusted(err); ok {
		trust := "the system's root certificates (set spec.source.s3.caSecretRef to the CA that signed the store's certificate)"
		if s.caSecret != "" {
			trust = fmt.Sprintf("the CA in Secret %s (spec.source.s3.caSecretRef); is it the CA that signed the store's certificate?", s.caSecret)
		}
		return &sourceError{ReasonCertificateNotTrusted, fmt.Sprintf("%s in bucket %s: the store's TLS certificate is not trusted (%s): it was checked against %s", what, s.bucket, msg, trust)}
	}
	return &sourceError{ReasonSourceUnreachable, fmt.Sprintf("%s in bucket %s: %v", what, s.bucket, err)}
}
