// Package versitygw runs an S3-compatible object store on loopback: versitygw (a
// real S3 gateway, built from source once and cached, see Build) with its posix
// backend on a directory. Buckets are directories and objects files under
// Server.Dir, so a test can also age an object (SetModTime) or damage it in place.
// The tests start a throwaway one (Start); `orderly dev up --with s3` a persistent
// one (Run with a directory and a port).
package versitygw

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"orderly.dev/orderly/internal/standin"
)

// Region is the region the store says it is in.
const Region = "us-east-1"

// Options say which gateway Run runs.
type Options struct {
	// Dir holds the data (Dir/data, one directory per bucket), the credentials of a
	// persistent store, and the log. Empty: a new temporary directory, removed by
	// Close.
	Dir string
	// Port on 127.0.0.1; 0 picks a free one.
	Port int
	// CertFile and KeyFile make it serve https only with that certificate; CACert
	// is the PEM certificate of the CA that signed it (Server.CACert).
	CertFile, KeyFile string
	CACert            []byte
	// Detached leaves the gateway running after this process ends (orderly dev
	// up); the next Run finds it again in Dir.
	Detached bool
	// Temporary says that Dir, given, is a temporary directory that Close removes.
	Temporary bool
}

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT, or https:// with a certificate.
	Endpoint string
	// CACert is the PEM certificate of the CA that signed the gateway's certificate;
	// nil for http.
	CACert []byte
	// AccessKey and SecretKey are the root credentials.
	AccessKey string
	SecretKey string
	// Dir is the posix backend's root: one directory per bucket.
	Dir string

	root    string
	tempDir bool
	proc    *standin.Process
}

// Start builds versitygw if needed and starts a throwaway gateway on a free port.
// Call Close to stop it and remove its files.
func Start(ctx context.Context) (*Server, error) {
	return Run(ctx, Options{})
}

// Run builds versitygw if needed and starts it as o says, or finds the one a
// previous Run left running in o.Dir; it returns once the gateway answers. A
// persistent store keeps its credentials and objects.
func Run(ctx context.Context, o Options) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{root: o.Dir, tempDir: o.Temporary}
	if s.root == "" {
		if s.root, err = os.MkdirTemp("", "orderly-tests3-"); err != nil {
			return nil, err
		}
		s.tempDir = true
	}
	s.Dir = filepath.Join(s.root, "data")
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	s.proc = &standin.Process{Name: "versitygw", Dir: s.root, Detached: o.Detached}
	if err := s.start(bin, o); err != nil {
		s.cleanup()
		return nil, err
	}
	return s, nil
}

func (s *Server) statePath() string { return filepath.Join(s.root, "standin.conf") }

// readState reads what a persistent gateway keeps: endpoint and credentials.
func (s *Server) readState() map[string]string {
	b, err := os.ReadFile(s.statePath())
	if err != nil {
		return nil
	}
	st := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			st[k] = v
		}
	}
	return st
}

func (s *Server) start(bin string, o Options) error {
	prev := s.readState()
	scheme := "http"
	if o.CertFile != "" {
		scheme = "https"
	}
	s.CACert = o.CACert
	if prev != nil && s.proc.Running() {
		s.Endpoint, s.AccessKey, s.SecretKey = prev["endpoint"], prev["access"], prev["secret"]
		want := ""
		if o.Port != 0 {
			want = fmt.Sprintf("%s://127.0.0.1:%d", scheme, o.Port)
		}
		if (want == "" || want == s.Endpoint) && strings.HasPrefix(s.Endpoint, scheme+"://") && s.waitReady(5*time.Second) == nil {
			return nil
		}
		if err := s.proc.Stop(10 * time.Second); err != nil {
			return err
		}
	}
	s.AccessKey, s.SecretKey = prev["access"], prev["secret"]
	if s.AccessKey == "" || s.SecretKey == "" {
		s.AccessKey, s.SecretKey = "orderly"+strings.ToLower(rand.Text()[:8]), rand.Text()
	}
	port, err := standin.ListenPort(o.Port, false, "the S3 store")
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.Endpoint = scheme + "://" + addr
	args := []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--region", Region, "--port", addr}
	if o.CertFile != "" {
		args = append(args, "--cert", o.CertFile, "--key", o.KeyFile)
	}
	if err := os.WriteFile(s.statePath(), fmt.Appendf(nil, "endpoint=%s\naccess=%s\nsecret=%s\n", s.Endpoint, s.AccessKey, s.SecretKey), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, append(args, "posix", s.Dir)...)
	// The credentials go in the environment too, so that versions that read them
	// from there (and not only from flags) agree.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	if err := s.proc.Start(cmd); err != nil {
		return fmt.Errorf("starting versitygw: %w", err)
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		_ = s.proc.Stop(5 * time.Second)
		return err
	}
	return nil
}

// waitReady polls the port until the gateway answers HTTP.
func (s *Server) waitReady(timeout time.Duration) error {
	c := http.Client{Timeout: time.Second, Transport: s.transport()}
	return s.proc.WaitReady(timeout, func() error {
		resp, err := c.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

// Pid is the gateway's process id.
func (s *Server) Pid() int { return s.proc.Pid() }

// Stop stops the gateway and keeps its files.
func (s *Server) Stop() error { return s.proc.Stop(10 * time.Second) }

// Close stops the gateway, and removes its files when they are in a temporary
// directory.
func (s *Server) Close() error {
	err := s.proc.Stop(10 * time.Second)
	s.cleanup()
	return err
}

func (s *Server) cleanup() {
	if s.tempDir {
		_ = os.RemoveAll(s.root)
	}
}

// Client is an S3 client logged in as root.
func (s *Server) Client() *s3.Client { return s.ClientAs(s.AccessKey, s.SecretKey) }

// transport trusts the gateway's CA (with a certificate) and nothing else.
func (s *Server) transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if s.CACert != nil {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(s.CACert)
		t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return t
}

// ClientAs is an S3 client with other credentials (to test refusals).
func (s *Server) ClientAs(accessKey, secretKey string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		HTTPClient:   &http.Client{Transport: s.transport()},
		Region:       Region,
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}, nil
		}),
	})
}

// CreateBucket creates bucket; one that exists already is no error.
func (s *Server) CreateBucket(ctx context.Context, bucket string) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	if err != nil && (strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") || strings.Contains(err.Error(), "BucketAlreadyExists")) {
		return nil
	}
	return err
}

// Put uploads body as bucket/key.
func (s *Server) Put(ctx context.Context, bucket, key string, body []byte) error {
	_, err := s.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
	return err
}

// PutFile uploads the file at path as bucket/key, streaming it.
func (s *Server) PutFile(ctx context.Context, bucket, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = s.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: io.Reader(f), ContentLength: aws.Int64(fi.Size())})
	return err
}

// Delete removes bucket/key.
func (s *Server) Delete(ctx context.Context, bucket, key string) error {
	_, err := s.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	return err
}

// SetModTime sets the LastModified the store reports for bucket/key: the posix
// backend reports the file's modification time.
func (s *Server) SetModTime(bucket, key string, t time.Time) error {
	return os.Chtimes(filepath.Join(s.Dir, bucket, filepath.FromSlash(key)), t, t)
}

// Keys lists every key of bucket.
func (s *Server) Keys(ctx context.Context, bucket string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}
