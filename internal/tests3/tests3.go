// Package tests3 starts a throwaway S3-compatible object store for tests: versitygw
// (a real S3 gateway, built from source once and cached, see Binary) with its posix
// backend on a temporary directory, listening on a free loopback port. Buckets are
// directories and objects files under Server.Dir, so a test can also age an object
// (SetModTime) or damage it in place. WithTLS serves https with a CA of the test's own.
package tests3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"orderly.dev/orderly/internal/localproc"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Region is the region the store says it is in.
const Region = "us-east-1"

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT, or https:// with WithTLS.
	Endpoint string
	// CACert is the PEM certificate of the CA that signed the gateway's certificate,
	// with WithTLS; nil otherwise.
	CACert []byte
	// AccessKey and SecretKey are the root credentials.
	AccessKey string
	SecretKey string
	// Dir is the posix backend's root: one directory per bucket.
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// options are what Start was asked for.
type options struct {
	tls bool
}

// Option changes the server Start starts.
type Option func(*options)

// WithTLS serves https only, with a certificate for 127.0.0.1 and localhost signed
// by a CA made for this server (Server.CACert).
func WithTLS() Option { return func(o *options) { o.tls = true } }

// Start builds versitygw if needed and starts it. Call Close to stop it and remove
// its files.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orderly-tests3-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: filepath.Join(dir, "data"), AccessKey: "orderlytest" + rand.Text()[:8], SecretKey: rand.Text(), done: make(chan struct{})}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.Endpoint = "http://" + addr
	args := []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--region", Region, "--port", addr}
	if o.tls {
		cert, key, ca, err := serverCert(dir)
		if err != nil {
			s.cleanup()
			return nil, fmt.Errorf("making versitygw's certificate: %w", err)
		}
		s.Endpoint, s.CACert = "https://"+addr, ca
		args = append(args, "--cert", cert, "--key", key)
	}
	s.log, err = os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	localproc.CloseInheritedOnExec()
	s.cmd = exec.Command(bin, append(args, "posix", s.Dir)...)
	// The credentials go in the environment too, so that versions that read them
	// from there (and not only from flags) agree.
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("starting versitygw: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.waitReady(30 * time.Second); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// waitReady polls the port until the gateway answers HTTP.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := http.Client{Timeout: time.Second, Transport: s.transport()}
	for {
		select {
		case <-s.done:
			return fmt.Errorf("versitygw exited at start: %s", s.logTail())
		default:
		}
		if resp, err := c.Get(s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw did not answer on %s within %s: %s", s.Endpoint, timeout, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	return string(tail(b, 2000))
}

// Close stops the gateway and removes its directory.
func (s *Server) Close() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	s.cleanup()
	return nil
}

func (s *Server) cleanup() {
	if s.log != nil {
		s.log.Close()
	}
	_ = os.RemoveAll(filepath.Dir(s.Dir))
}

// Client is an S3 client logged in as root.
func (s *Server) Client() *s3.Client { return s.ClientAs(s.AccessKey, s.SecretKey) }

// transport trusts the gateway's CA (with WithTLS) and nothing else.
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

// CreateBucket creates bucket.
func (s *Server) CreateBucket(ctx context.Context, bucket string) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address")
	}
	return addr.Port, nil
}
