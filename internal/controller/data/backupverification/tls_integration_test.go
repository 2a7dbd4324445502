//go:build integration

package backupverification

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/testpg"
	"orderly.dev/orderly/internal/testing/tests3"
)

// caSecret creates a Secret holding ca as ca.crt in the suite's namespace.
func caSecret(t *testing.T, ca []byte) string {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: suiteNamespace, Name: uniq("ca")},
		Data: map[string][]byte{datav1alpha1.CACertKey: ca}}
	if err := k.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	return sec.Name
}

// Over https, with spec.source.s3.caSecretRef naming the CA that signed the store's
// certificate, a backup is verified; with another CA, the run is an Error with the
// reason CertificateNotTrusted and a message that names the CA Secret, SourceAvailable
// is False, a Warning Event says so, and the retry waits for its backoff.
func TestS3OverTLS(t *testing.T) {
	ctx := context.Background()
	secure, err := tests3.Start(ctx, tests3.WithTLS())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = secure.Close() })
	if err := secure.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	if err := secure.Put(ctx, bucket, "tls/shop.dump", dumps.custom); err != nil {
		t.Fatal(err)
	}
	server := newServer(t)
	creds := credentials(t, suiteNamespace, secure.AccessKey, secure.SecretKey)
	overTLS := func(ca string) func(*datav1alpha1.BackupVerificationSpec) {
		return func(s *datav1alpha1.BackupVerificationSpec) {
			s.Source.S3.Endpoint, s.Source.S3.Insecure = secure.Endpoint, false
			s.Source.S3.CredentialsSecretRef.Name = creds
			s.Source.S3.CASecretRef = &datav1alpha1.LocalSecretKeyReference{Name: ca}
		}
	}

	t.Run("the store's CA", func(t *testing.T) {
		got := waitRun(t, newBV(t, suiteNamespace, server, "tls/", overTLS(caSecret(t, secure.CACert))), 1)
		expectRun(t, got, datav1alpha1.RunPassed, ReasonPassed)
		if got.Status.LastRun.Backup.Key != "tls/shop.dump" {
			t.Errorf("backup: %+v", got.Status.LastRun.Backup)
		}
		expectNoThrowaway(t, got)
	})

	t.Run("another CA", func(t *testing.T) {
		other, err := testpg.OtherCA()
		if err != nil {
			t.Fatal(err)
		}
		wrongCA := caSecret(t, other)
		got := waitRun(t, newBV(t, suiteNamespace, server, "tls/", overTLS(wrongCA)), 1)
		expectRun(t, got, datav1alpha1.RunError, ReasonCertificateNotTrusted)
		if msg := got.Status.LastRun.Message; !strings.Contains(msg, "not trusted") || !strings.Contains(msg, wrongCA) {
			t.Errorf("message does not say which CA failed to vouch for the store: %q", msg)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionSourceAvailable); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonCertificateNotTrusted {
			t.Errorf("SourceAvailable: %+v", c)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonCertificateNotTrusted {
			t.Errorf("Ready: %+v", c)
		}
		// Retried, but after a backoff, not at once. The next run's time may be
		// written by a later status update than the run's result.
		for wait := time.Now().Add(timeout); got.Status.NextRunTime == nil && time.Now().Before(wait); {
			time.Sleep(poll)
			if err := k.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
				t.Fatal(err)
			}
		}
		if next := got.Status.NextRunTime; next == nil || next.Sub(got.Status.LastRun.StartTime.Time) < 20*time.Second {
			t.Errorf("next run %v after a run started %v: want a backoff", next, got.Status.LastRun.StartTime)
		}
		deadline := time.Now().Add(timeout)
		for {
			var events eventsv1.EventList
			if err := k.List(ctx, &events, client.InNamespace(suiteNamespace)); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range events.Items {
				found = found || (e.Regarding.UID == got.UID && e.Type == "Warning" && strings.Contains(e.Note, ReasonCertificateNotTrusted))
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no Warning Event about the untrusted certificate")
			}
			time.Sleep(poll)
		}
		expectNoThrowaway(t, got)
	})
}
