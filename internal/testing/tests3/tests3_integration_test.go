//go:build integration

package tests3

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The gateway serves real S3 requests: a bucket, an object written and read back,
// its LastModified moved by SetModTime, and wrong credentials refused.
func TestServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateBucket(ctx, "dumps"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "dumps", "a/b.dump", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(ctx, "dumps")
	if err != nil || !slices.Equal(keys, []string{"a/b.dump"}) {
		t.Fatalf("keys %v, %v", keys, err)
	}
	out, err := s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("dumps"), Key: aws.String("a/b.dump")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("body %q", body)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.SetModTime("dumps", "a/b.dump", old); err != nil {
		t.Fatal(err)
	}
	head, err := s.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("dumps"), Key: aws.String("a/b.dump")})
	if err != nil || !aws.ToTime(head.LastModified).Equal(old) {
		t.Fatalf("LastModified %v, %v; want %v", aws.ToTime(head.LastModified), err, old)
	}
	if _, err := s.ClientAs("nobody", "wrong").ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("dumps")}); err == nil {
		t.Fatal("wrong credentials were accepted")
	}
}

// WithTLS serves https only, with a certificate that its CA vouches for and that a
// client trusting only the system's roots refuses.
func TestServerTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, WithTLS())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Endpoint, "https://") || len(s.CACert) == 0 {
		t.Fatalf("endpoint %s, CA %d bytes", s.Endpoint, len(s.CACert))
	}
	if err := s.CreateBucket(ctx, "dumps"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "dumps", "a.dump", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	untrusting := s3.New(s3.Options{BaseEndpoint: aws.String(s.Endpoint), Region: Region, UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}, nil
		})})
	_, err = untrusting.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("dumps")})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("a client that does not trust the test CA: %v; want an unknown authority error", err)
	}
}
