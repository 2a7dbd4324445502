package dnsupdate

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestRecords(t *testing.T) {
	tests := []struct {
		values          []string
		wantA, wantAAAA string
		wantCNAME       string
		wantErr         bool
	}{
		{values: []string{"192.0.2.2", "192.0.2.1", "192.0.2.1"}, wantA: "192.0.2.1,192.0.2.2"},
		{values: []string{"2001:db8::1", "192.0.2.1"}, wantA: "192.0.2.1", wantAAAA: "2001:db8::1"},
		{values: []string{"::ffff:192.0.2.9"}, wantA: "192.0.2.9"},
		{values: []string{"LB.Example.com."}, wantCNAME: "lb.example.com"},
		{values: []string{"lb.example.com", "192.0.2.1"}, wantErr: true},
		{values: []string{"a.example.com", "b.example.com"}, wantErr: true},
		{values: []string{"not a name"}, wantErr: true},
		// An address with a zone: the record holds the address alone, so what the server
		// answers never equalled the value and every reconcile wrote (found by FuzzRecords).
		{values: []string{"fe80::1%eth0"}, wantErr: true},
	}
	for _, tt := range tests {
		a, aaaa, cname, err := Records(tt.values)
		if (err != nil) != tt.wantErr {
			t.Fatalf("Records(%v) error = %v, want error %v", tt.values, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		if strings.Join(a, ",") != tt.wantA || strings.Join(aaaa, ",") != tt.wantAAAA || cname != tt.wantCNAME {
			t.Errorf("Records(%v) = %v %v %q, want %s %s %q", tt.values, a, aaaa, cname, tt.wantA, tt.wantAAAA, tt.wantCNAME)
		}
	}
}

func TestPlan(t *testing.T) {
	mine := OwnerValue("shop", "web")
	d := Desired{Zone: "int.example.com", Host: "web.int.example.com", Owner: mine, Values: []string{"192.0.2.1"}, TTL: 60}
	tests := []struct {
		name     string
		observed Observed
		want     Action
	}{
		{name: "free name", observed: Observed{}, want: Create},
		{name: "as desired", observed: Observed{A: []string{"192.0.2.1"}, Owner: []string{mine}, TTL: 60}, want: Nothing},
		{name: "record deleted by hand", observed: Observed{Owner: []string{mine}}, want: Replace},
		{name: "record changed by hand", observed: Observed{A: []string{"192.0.2.99"}, Owner: []string{mine}, TTL: 60}, want: Replace},
		{name: "TTL changed", observed: Observed{A: []string{"192.0.2.1"}, Owner: []string{mine}, TTL: 300}, want: Replace},
		{name: "CNAME where an A belongs", observed: Observed{CNAME: "x.example.com", Owner: []string{mine}, TTL: 60}, want: Replace},
		{name: "a second owner TXT added by hand", observed: Observed{A: []string{"192.0.2.1"}, Owner: []string{mine, "x"}, TTL: 60}, want: Conflict},
		{name: "foreign record without TXT", observed: Observed{A: []string{"198.51.100.1"}, TTL: 60}, want: Conflict},
		{name: "another ServiceDomain's name", observed: Observed{A: []string{"192.0.2.1"}, Owner: []string{OwnerValue("other", "web")}}, want: Conflict},
		{name: "another owner's TXT alone", observed: Observed{Owner: []string{"heritage=external-dns,external-dns/owner=default"}}, want: Conflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := Plan(d, tt.observed)
			if got != tt.want {
				t.Fatalf("Plan = %s (%s), want %s", got, why, tt.want)
			}
			if got == Conflict && why == "" {
				t.Fatal("a conflict without a reason")
			}
		})
	}
}

func TestUpdateForCarriesPrerequisites(t *testing.T) {
	d := Desired{Zone: "int.example.com", Host: "web.int.example.com", Owner: OwnerValue("shop", "web"), Values: []string{"192.0.2.1", "2001:db8::1"}, TTL: 60}
	m, err := UpdateFor(Create, d)
	if err != nil {
		t.Fatal(err)
	}
	// Create: A, AAAA, CNAME at the host and TXT at the owner name must not exist.
	if len(m.Answer) != 4 {
		t.Fatalf("prerequisites = %v, want 4", m.Answer)
	}
	for _, rr := range m.Answer {
		if rr.Header().Class != dns.ClassNONE {
			t.Errorf("create prerequisite %v is not 'RRset does not exist'", rr)
		}
	}
	if len(m.Ns) != 3 {
		t.Fatalf("updates = %v, want A, AAAA and the owner TXT", m.Ns)
	}
	m, err = UpdateFor(Replace, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Answer) != 1 || m.Answer[0].(*dns.TXT).Txt[0] != d.Owner || m.Answer[0].Header().Class != dns.ClassINET {
		t.Fatalf("replace prerequisite = %v, want our TXT (value dependent)", m.Answer)
	}
	del := DeleteFor(d.Zone, d.Host, d.Owner)
	if len(del.Answer) != 1 || del.Answer[0].Header().Name != "_orderly-owner.web.int.example.com." {
		t.Fatalf("delete prerequisite = %v", del.Answer)
	}
	for _, rr := range del.Ns {
		if rr.Header().Class != dns.ClassANY {
			t.Errorf("delete %v does not remove an RRset", rr)
		}
	}
}

// An update never names a record outside the zone it is sent for (found by FuzzPlan:
// UpdateFor built one for any hostname, leaving the zone's server to refuse it).
func TestUpdateForStaysInTheZone(t *testing.T) {
	for _, host := range []string{"web.other.com", "int.example.com.evil.io", "example.com"} {
		d := Desired{Zone: "int.example.com", Host: host, Owner: OwnerValue("shop", "web"), Values: []string{"192.0.2.1"}, TTL: 60}
		if _, err := UpdateFor(Create, d); err == nil || !strings.Contains(err.Error(), "is not in zone int.example.com") {
			t.Errorf("UpdateFor of %s in zone int.example.com: %v", host, err)
		}
	}
}

// A ServiceDomain's namespace and name make ownership values up to 348 bytes, more
// than a TXT string holds: the update did not pack ("string exceeded 255 bytes in
// txt", found by FuzzPlan). The value is cut into strings that Observe joins again.
func TestLongOwnerValue(t *testing.T) {
	owner := OwnerValue(strings.Repeat("n", 63), strings.Repeat("s", 253))
	d := Desired{Zone: "int.example.com", Host: "web.int.example.com", Owner: owner, Values: []string{"192.0.2.1"}, TTL: 60}
	for _, action := range []Action{Create, Replace} {
		m, err := UpdateFor(action, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Pack(); err != nil {
			t.Fatalf("%s does not pack: %v", action, err)
		}
	}
	txt := ownerTXT("x.", owner, 0)
	if len(txt.Txt) != 2 || strings.Join(txt.Txt, "") != owner {
		t.Fatalf("TXT strings %d, joined %v", len(txt.Txt), strings.Join(txt.Txt, "") == owner)
	}
	if _, err := DeleteFor(d.Zone, d.Host, owner).Pack(); err != nil {
		t.Fatalf("the delete does not pack: %v", err)
	}
}

func TestKeyValidateDoesNotQuoteTheSecret(t *testing.T) {
	k := Key{Name: "k", Algorithm: "hmac-md4", Secret: "c2VjcmV0"}
	err := k.Validate()
	if err == nil || strings.Contains(err.Error(), k.Secret) {
		t.Fatalf("Validate = %v", err)
	}
	if err := (Key{Name: "k", Secret: "c2VjcmV0"}).Validate(); err != nil {
		t.Fatalf("default algorithm refused: %v", err)
	}
}
