package backupverification

import (
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// FuzzBackupSchedule asks when the next run of a BackupVerification with any
// schedule (cron and time zone), last run and failures is. Properties: it returns in
// bounded time; a bad schedule is an error with a message; a trigger is one of the
// four; with none, the next run is after now (never a run due in the past that is
// not run) and the retry backoff stays between its bounds.
func FuzzBackupSchedule(f *testing.F) {
	for _, s := range []struct {
		cron, tz, verifyNow string
		runs                int64
		started, now        int64
		errored             bool
		failures            int32
	}{
		{"0 3 * * *", "", "", 0, 0, 0, false, 0},
		{"0 3 * * *", "", "", 1, 0, 3600, false, 0},
		{"0 3 * * *", "", "", 1, 0, 8 * 86400, false, 0},
		{"0 3 * * *", "", "t1", 1, 0, 3600, false, 0},
		{"0 3 * * *", "", "", 1, 0, 70, true, 1},
		{"", "", "", 1, 0, 90, true, 1},
		{"0 3 * * mon-fri", "Europe/Berlin", "", 1, 0, 86400, true, 40},
		{"0 0 * * *", "America/Havana", "", 1, 0, 86400, false, 0},
		{"0 0 * *", "", "", 1, 0, 0, false, 0},
		{"0 3 * * *", "Local", "", 1, 0, 0, false, 0},
	} {
		f.Add(s.cron, s.tz, s.verifyNow, s.runs, s.started, s.now, s.errored, s.failures)
	}
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, cron, tz, verifyNow string, runs int64, started, now int64, errored bool, failures int32) {
		bv := &datav1alpha1.BackupVerification{Spec: datav1alpha1.BackupVerificationSpec{VerifyNow: verifyNow}}
		bv.CreationTimestamp = metav1.NewTime(created)
		if cron != "" || tz != "" {
			bv.Spec.Schedule = &datav1alpha1.BackupSchedule{Cron: cron, TimeZone: tz}
		}
		year := int64(365 * 24 * 3600)
		start := created.Add(time.Duration(started%(5*year)) * time.Second)
		n := start.Add(time.Duration(now%(5*year)) * time.Second)
		if runs != 0 {
			bv.Status.Runs = runs
			run := &datav1alpha1.BackupRun{Number: 1, StartTime: &metav1.Time{Time: start}, CompletionTime: &metav1.Time{Time: start.Add(time.Minute)}, Result: datav1alpha1.RunPassed}
			if errored {
				run.Result = datav1alpha1.RunError
			}
			bv.Status.LastRun, bv.Status.ConsecutiveFailures = run, failures
		}
		type answer struct {
			trigger string
			next    time.Time
			err     error
		}
		done := make(chan answer, 1)
		go func() {
			trigger, next, err := due(bv, n)
			done <- answer{trigger, next, err}
		}()
		var a answer
		select {
		case a = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("due of %+v at %s did not return within 30s", bv.Spec, n)
		}
		if a.err != nil {
			if a.err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		switch a.trigger {
		case TriggerInitial, TriggerSchedule, TriggerVerifyNow, TriggerRetry:
			if !a.next.IsZero() {
				t.Fatalf("trigger %s with a next time %s", a.trigger, a.next)
			}
		case "":
			if !a.next.IsZero() && !a.next.After(n) {
				t.Fatalf("no run due at %s, but the next is %s (%+v)", n, a.next, bv.Spec)
			}
		default:
			t.Fatalf("trigger %q", a.trigger)
		}
		if r := retryAfter(failures); r < minRetry || r > maxRetry {
			t.Fatalf("retryAfter(%d) = %s", failures, r)
		}
	})
}

// FuzzKeyPattern compiles any keyPattern and picks the newest dump among any keys.
// Properties: a bad pattern is refused naming keyPattern; the dump picked is one of
// the keys, matches the pattern, is no checksum file or folder, and no other such key
// is newer by the ts group or, without one, by modification time.
func FuzzKeyPattern(f *testing.F) {
	f.Add(`orders-(?P<ts>\d{8}T\d{6}Z)\.dump\.gz$`, "n/orders-20260103T000000Z.dump.gz", "n/orders-20260102T000000Z.dump.gz", int64(7200))
	f.Add(`\.dump\.gz$`, "n/orders-20260103T000000Z.dump.gz", "n/orders-20260103T000000Z.dump.gz.sha256", int64(0))
	f.Add(``, "a", "b", int64(0))
	f.Add(`(`, "a", "n/", int64(1))
	f.Fuzz(func(t *testing.T, pattern, k1, k2 string, later int64) {
		re, err := compilePattern(pattern)
		if err != nil {
			if !strings.Contains(err.Error(), "keyPattern") {
				t.Fatalf("the error %q does not name keyPattern", err)
			}
			return
		}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		objs := []Backup{{Key: k1, LastModified: t0}, {Key: k2, LastModified: t0.Add(time.Duration(later%86400) * time.Second)}}
		got, ok := newest(objs, re)
		candidate := func(b Backup) bool {
			return !strings.HasSuffix(b.Key, checksumSuffix) && !strings.HasSuffix(b.Key, "/") && (re == nil || re.MatchString(b.Key))
		}
		if !ok {
			for _, o := range objs {
				if candidate(o) {
					t.Fatalf("no dump picked, but %q is one", o.Key)
				}
			}
			return
		}
		if !candidate(got) || (got.Key != k1 && got.Key != k2) {
			t.Fatalf("picked %q, which is not a dump among the keys", got.Key)
		}
		if re == nil || re.SubexpIndex("ts") < 0 {
			for _, o := range objs {
				if candidate(o) && o.LastModified.After(got.LastModified) {
					t.Fatalf("picked %q, but %q is newer", got.Key, o.Key)
				}
			}
		}
	})
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzParseChecksum reads any bytes as a dump's .sha256 file. Properties: what it
// accepts is 64 lower-case hex digits, the file's first field; a refusal has a message.
func FuzzParseChecksum(f *testing.F) {
	sum := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, s := range []string{sum + "  orders.dump.gz\n", sum + "\n", strings.ToUpper(sum) + " *x", "", "abc  x", sum[:62] + "zz  x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseChecksum(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		first := strings.Fields(string(data))[0]
		if b, _ := hex.DecodeString(got); !hex64.MatchString(got) || len(b) != 32 || got != strings.ToLower(first) {
			t.Fatalf("parseChecksum(%q) = %q", data, got)
		}
	})
}
