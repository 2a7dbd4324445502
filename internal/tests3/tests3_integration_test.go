//go:build integration

package tests3

import (
	"context"
	"io"
	"slices"
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
