//go:build integration

package versitygw

import (
	"context"
	"slices"
	"testing"
	"time"

	"orderly.dev/orderly/internal/standin"
)

// A persistent store is found again by the next Run, and keeps its credentials and
// objects across a restart.
func TestRunPersistent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port, err := standin.FreePort(false)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: t.TempDir(), Port: port}
	s, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(ctx, "backups"); err != nil {
		t.Fatalf("creating a bucket that exists: %v", err)
	}
	if err := s.Put(ctx, "backups", "a.dump", []byte("x")); err != nil {
		t.Fatal(err)
	}
	again, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pid() != s.Pid() || again.AccessKey != s.AccessKey {
		t.Fatalf("a second Run started another store: pid %d (was %d)", again.Pid(), s.Pid())
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	if restarted.AccessKey != s.AccessKey || restarted.SecretKey != s.SecretKey || restarted.Endpoint != s.Endpoint {
		t.Error("the credentials or the endpoint changed across a restart")
	}
	keys, err := restarted.Keys(ctx, "backups")
	if err != nil || !slices.Equal(keys, []string{"a.dump"}) {
		t.Fatalf("keys after a restart %v, %v", keys, err)
	}
}
