//go:build integration

package imagescan

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"orderly.dev/orderly/internal/testing/testimages"
	"orderly.dev/orderly/internal/testing/testregistry"
)

func startRegistry(t *testing.T) *testregistry.Registry {
	t.Helper()
	reg, err := testregistry.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

func push(t *testing.T, host, repoTag string, c testimages.Contents, opts ...remote.Option) string {
	t.Helper()
	d, err := testimages.Push(context.Background(), host, repoTag, c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func wantReason(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if ReasonOf(err) != reason {
		t.Fatalf("%s: got %v, want reason %s", what, err, reason)
	}
}

func TestScanFromRegistry(t *testing.T) {
	reg := startRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbDir := t.TempDir()
	if err := testimages.WriteOSV(dbDir, testVulns...); err != nil {
		t.Fatal(err)
	}
	s := newTestScanner(t, Options{DBDir: dbDir, Insecure: []string{reg.Host}})

	scan := func(t *testing.T, repoTag string, c testimages.Contents) (*Report, string) {
		t.Helper()
		digest := push(t, reg.Host, repoTag, c)
		got, err := s.Resolve(ctx, reg.Host+"/"+repoTag, nil)
		if err != nil || got != digest {
			t.Fatalf("Resolve(%s) = %q, %v; want the pushed digest %s", repoTag, got, err, digest)
		}
		repo, _, _ := strings.Cut(repoTag, ":")
		rep, err := s.Scan(ctx, reg.Host+"/"+repo+"@"+digest, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Digest != digest || rep.Repository != reg.Host+"/"+repo || rep.DBVersion != s.DBVersion() || rep.ScannerVersion == "" {
			t.Errorf("report identity: digest %s repository %s db %s scanner %q", rep.Digest, rep.Repository, rep.DBVersion, rep.ScannerVersion)
		}
		t.Logf("%s (%s, %s)", rep, rep.Platform, rep.Duration)
		return rep, digest
	}

	t.Run("debian image: the vulnerable package with its fix and severity; the one at its fix is not reported", func(t *testing.T) {
		rep, _ := scan(t, "team/debian:1", testimages.Contents{Dpkg: []testimages.Pkg{
			{Name: "openssl", Version: "3.0.11-1~deb12u2"}, {Name: "zlib", Version: "1:1.2.13.dfsg-1"}, {Name: "bash", Version: "5.2.15-2+b2"},
		}})
		if len(rep.Findings) != 1 {
			t.Fatalf("findings %+v, want the openssl one only", rep.Findings)
		}
		f := rep.Findings[0]
		if f.ID != "DEBIAN-CVE-2026-0001" || f.Package != "openssl" || f.Installed != "3.0.11-1~deb12u2" || f.Fixed != "3.0.15-1~deb12u1" || f.Severity != SeverityCritical {
			t.Errorf("finding %+v", f)
		}
		if rep.Packages != 3 || rep.OS != "debian 12" || rep.Platform != "linux/"+runtime.GOARCH || rep.Counts[SeverityCritical] != 1 {
			t.Errorf("packages %d OS %q platform %q counts %v", rep.Packages, rep.OS, rep.Platform, rep.Counts)
		}
	})
	t.Run("alpine image", func(t *testing.T) {
		rep, _ := scan(t, "team/alpine:1", testimages.Contents{Apk: []testimages.Pkg{{Name: "busybox", Version: "1.36.1-r29"}, {Name: "musl", Version: "1.2.5-r0"}}})
		if len(rep.Findings) != 1 || rep.Findings[0].ID != "ALPINE-CVE-2026-0003" || rep.Findings[0].Fixed != "1.36.1-r30" || rep.Findings[0].Severity != SeverityHigh {
			t.Fatalf("findings %+v", rep.Findings)
		}
	})
	t.Run("almalinux image: an RPM database written by rpm", func(t *testing.T) {
		rep, _ := scan(t, "team/alma:1", testimages.Contents{Rpm: []testimages.Pkg{{Name: "openssl-libs", Version: "1:3.0.7-24.el9"}, {Name: "bash", Version: "5.1.8-9.el9"}}})
		if len(rep.Findings) != 1 || rep.Findings[0].ID != "ALSA-2026:0006" || rep.Findings[0].Installed != "1:3.0.7-24.el9" || rep.Findings[0].Severity != SeverityHigh {
			t.Fatalf("findings %+v", rep.Findings)
		}
		if rep.Packages != 2 || rep.OS != "almalinux 9.4" {
			t.Errorf("packages %d OS %q", rep.Packages, rep.OS)
		}
	})
	t.Run("go binary", func(t *testing.T) {
		rep, _ := scan(t, "team/gobin:1", testimages.Contents{GoModules: []testimages.Pkg{{Name: "golang.org/x/text", Version: "v0.3.7"}}})
		if len(rep.Findings) != 1 || rep.Findings[0].ID != "GO-2026-0004" || rep.Findings[0].Installed != "0.3.7" || rep.Findings[0].Severity != SeverityMedium {
			t.Fatalf("findings %+v", rep.Findings)
		}
	})
	t.Run("clean image", func(t *testing.T) {
		rep, _ := scan(t, "team/clean:1", testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.15-1~deb12u1"}, {Name: "bash", Version: "5.2.15-2+b2"}}})
		if len(rep.Findings) != 0 || rep.Packages != 2 || len(rep.Counts) != 0 {
			t.Fatalf("findings %+v, %d packages, counts %v; want none, 2, none", rep.Findings, rep.Packages, rep.Counts)
		}
	})
	t.Run("multi-platform index: the index digest, this platform's image", func(t *testing.T) {
		other := "arm64"
		if runtime.GOARCH == "arm64" {
			other = "amd64"
		}
		digest, err := testimages.PushIndex(ctx, reg.Host, "team/multi:1", []testimages.Platform{
			{Architecture: other, Contents: testimages.Contents{Dpkg: []testimages.Pkg{{Name: "bash", Version: "5"}}}},
			{Architecture: runtime.GOARCH, Contents: testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.11-1~deb12u2"}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Resolve(ctx, reg.Host+"/team/multi:1", nil); err != nil || got != digest {
			t.Fatalf("Resolve = %q, %v; want the index digest %s", got, err, digest)
		}
		rep, err := s.Scan(ctx, reg.Host+"/team/multi:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Digest != digest || len(rep.Findings) != 1 || rep.Findings[0].Package != "openssl" || rep.Platform != "linux/"+runtime.GOARCH {
			t.Fatalf("report %+v", rep)
		}
		s390x := newTestScanner(t, Options{DBDir: dbDir, Insecure: []string{reg.Host}, Architecture: "s390x"})
		_, err = s390x.Scan(ctx, reg.Host+"/team/multi@"+digest, nil)
		wantReason(t, "an index without this platform", err, ReasonUnsupportedMediaType)
		if !strings.Contains(err.Error(), "linux/s390x") {
			t.Errorf("message %q does not name the platform", err)
		}
	})
	t.Run("OCI artifact", func(t *testing.T) {
		digest, err := testimages.PushArtifact(ctx, reg.Host, "team/chart:1", []byte("not an image"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Scan(ctx, reg.Host+"/team/chart@"+digest, nil)
		wantReason(t, "artifact", err, ReasonUnsupportedMediaType)
	})
	t.Run("unknown tag, repository, digest", func(t *testing.T) {
		_, err := s.Resolve(ctx, reg.Host+"/team/debian:nope", nil)
		wantReason(t, "Resolve of an unknown tag", err, ReasonNotFound)
		_, err = s.Scan(ctx, reg.Host+"/team/debian:nope", nil)
		wantReason(t, "Scan of an unknown tag", err, ReasonNotFound)
		_, err = s.Resolve(ctx, reg.Host+"/nobody/nothing:1", nil)
		wantReason(t, "Resolve of an unknown repository", err, ReasonNotFound)
		_, err = s.Scan(ctx, reg.Host+"/team/debian@sha256:"+strings.Repeat("0", 64), nil)
		wantReason(t, "Scan of an unknown digest", err, ReasonNotFound)
	})
	t.Run("database change: new version, new findings", func(t *testing.T) {
		c := testimages.Contents{Dpkg: []testimages.Pkg{{Name: "bash", Version: "5.2.15-2+b2"}}}
		before, digest := scan(t, "team/bash:1", c)
		if len(before.Findings) != 0 {
			t.Fatalf("findings before the record: %+v", before.Findings)
		}
		if err := testimages.WriteOSV(dbDir, append(testVulns[:3:3], testimages.Vuln{ID: "DEBIAN-CVE-2026-0100", Ecosystem: "Debian:12", Package: "bash", Fixed: "5.2.15-2+b3", Severity: "HIGH"})...); err != nil {
			t.Fatal(err)
		}
		if changed, err := s.ReloadDB(); err != nil || !changed {
			t.Fatalf("ReloadDB: changed %v, %v", changed, err)
		}
		after, err := s.Scan(ctx, reg.Host+"/team/bash@"+digest, nil)
		if err != nil {
			t.Fatal(err)
		}
		if after.DBVersion == before.DBVersion || len(after.Findings) != 1 || after.Findings[0].ID != "DEBIAN-CVE-2026-0100" {
			t.Fatalf("after the change: db %s (was %s), findings %+v", after.DBVersion, before.DBVersion, after.Findings)
		}
	})
	t.Run("registry down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		host := l.Addr().String()
		_ = l.Close()
		down := newTestScanner(t, Options{DBDir: dbDir, Insecure: []string{host}})
		_, err = down.Scan(ctx, host+"/team/debian:1", nil)
		wantReason(t, "Scan on a closed port", err, ReasonRegistryUnreachable)
		_, err = down.Resolve(ctx, host+"/team/debian:1", nil)
		wantReason(t, "Resolve on a closed port", err, ReasonRegistryUnreachable)
	})
}

// keychain hands the same credentials to every registry.
type keychain struct{ auth authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

func TestScanWithRegistryAuth(t *testing.T) {
	reg, err := testregistry.StartWithAuth("puller", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	good := authn.FromConfig(authn.AuthConfig{Username: "puller", Password: "s3cret"})
	digest := push(t, reg.Host, "private/app:1", testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.11-1~deb12u2"}}}, remote.WithAuth(good))
	s := newTestScanner(t, Options{Insecure: []string{reg.Host}}, testVulns...)
	ref := reg.Host + "/private/app@" + digest

	rep, err := s.Scan(ctx, ref, keychain{good})
	if err != nil || len(rep.Findings) != 1 {
		t.Fatalf("with the right password: %+v, %v", rep, err)
	}
	if got, err := s.Resolve(ctx, reg.Host+"/private/app:1", keychain{good}); err != nil || got != digest {
		t.Fatalf("Resolve with the right password: %q, %v", got, err)
	}
	wrong := keychain{authn.FromConfig(authn.AuthConfig{Username: "puller", Password: "wrong"})}
	_, err = s.Scan(ctx, ref, wrong)
	wantReason(t, "Scan with a wrong password", err, ReasonAuthFailed)
	if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows a password: %v", err)
	}
	_, err = s.Resolve(ctx, reg.Host+"/private/app:1", wrong)
	wantReason(t, "Resolve with a wrong password", err, ReasonAuthFailed)
	_, err = s.Scan(ctx, ref, nil)
	wantReason(t, "Scan without credentials", err, ReasonAuthFailed)
}
