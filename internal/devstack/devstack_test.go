package devstack

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/standin"
)

func TestParseParts(t *testing.T) {
	all, err := ParseParts([]string{"all"})
	if err != nil || !slices.Equal(all, AllParts) {
		t.Fatalf("all = %v, %v", all, err)
	}
	some, err := ParseParts([]string{"dns", " s3", "dns"})
	if err != nil || !slices.Equal(some, []Part{DNS, S3}) {
		t.Fatalf("dns,s3,dns = %v, %v", some, err)
	}
	if _, err := ParseParts([]string{"minio"}); err == nil || !strings.Contains(err.Error(), "gateway-api") {
		t.Fatalf("an unknown part: %v, want the list of parts", err)
	}
	for _, p := range AllParts {
		if affects[p] == "" {
			t.Errorf("part %s does not say what stays not Ready without it", p)
		}
	}
}

// The samples name the stand-ins at their well-known addresses; a stack on other
// ports gets every one of them replaced, and with the well-known ports the files are
// applied as they are.
func TestSamplesFor(t *testing.T) {
	files, err := config.Samples()
	if err != nil {
		t.Fatal(err)
	}
	same, err := SamplesFor(DefaultPorts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if string(files[i].Data) != string(same[i].Data) {
			t.Errorf("%s changed with the default ports", files[i].Name)
		}
	}
	// What is applied: the comments (which name the well-known ports for a reader)
	// left out.
	all := func(fs []config.File) string {
		var b strings.Builder
		for _, f := range fs {
			for _, line := range strings.Split(string(f.Data), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "#") {
					b.WriteString(line + "\n")
				}
			}
		}
		return b.String()
	}
	text := all(files)
	d := DefaultPorts
	for _, addr := range []string{
		fmt.Sprintf("127.0.0.1:%d", d.DNS), fmt.Sprintf("http://127.0.0.1:%d", d.S3), fmt.Sprintf("http://127.0.0.1:%d", d.Prometheus),
		fmt.Sprintf("127.0.0.1:%d/", d.Registry), fmt.Sprintf("port: %d", d.Postgres),
	} {
		if !strings.Contains(text, addr) {
			t.Errorf("no sample names %s: the replacement of it is dead", addr)
		}
	}
	other := Ports{Postgres: 40001, DNS: 40002, S3: 40003, Prometheus: 40004, CanaryApp: 40005, Registry: 40006, CertManagerMetrics: 40007}
	moved, err := SamplesFor(other)
	if err != nil {
		t.Fatal(err)
	}
	text = all(moved)
	for _, port := range []int{d.Postgres, d.DNS, d.S3, d.Prometheus, d.Registry} {
		if strings.Contains(text, fmt.Sprint(port)) {
			t.Errorf("the samples for other ports still name %d", port)
		}
	}
	for _, port := range []int{other.Postgres, other.DNS, other.S3, other.Prometheus, other.Registry} {
		if !strings.Contains(text, fmt.Sprint(port)) {
			t.Errorf("the samples for other ports do not name %d", port)
		}
	}
}

// Every sample of Orderly's kinds is waited for; the other objects (namespaces,
// Deployments, Services) are not.
func TestSampleObjects(t *testing.T) {
	files, err := config.Samples()
	if err != nil {
		t.Fatal(err)
	}
	objects, err := SampleObjects(files)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objects {
		kinds[o.Kind]++
	}
	for _, k := range []string{"Tenant", "SleepSchedule", "LabelPolicy", "LabelValueSet", "DatabaseServer", "DevDatabase", "SecretRotation",
		"BackupVerification", "Canary", "ImagePolicy", "DomainZone", "ServiceDomain", "PlacementPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the samples waited for", k)
		}
	}
	if kinds["Deployment"] != 0 || kinds["Namespace"] != 0 {
		t.Errorf("objects of other kinds are waited for: %v", kinds)
	}
}

// A stand-in whose program is missing says what stays not Ready and the command that
// installs it; any other failure says what went wrong and what stays not Ready.
func TestResultOf(t *testing.T) {
	missing := fmt.Errorf("starting: %w", &standin.MissingError{What: "the DNS server named (Debian's bind9)", Install: "sudo apt-get install -y bind9"})
	r := resultOf(DNS, Result{}, missing)
	if r.Ready || r.Fix != "sudo apt-get install -y bind9" || !strings.Contains(r.Detail, "named (Debian's bind9) is not installed") ||
		!strings.Contains(r.Detail, "DomainZone int-example and ServiceDomain shop") {
		t.Errorf("missing named: %+v", r)
	}
	r = resultOf(S3, Result{}, errors.New("go install: exit status 1"))
	if r.Ready || r.Fix != "" || !strings.Contains(r.Detail, "exit status 1; not Ready without it: BackupVerification orders-nightly") {
		t.Errorf("a failed build: %+v", r)
	}
	if r := resultOf(Member, Result{Detail: "up"}, nil); !r.Ready || r.Part != Member || r.Detail != "up" {
		t.Errorf("success: %+v", r)
	}
}
