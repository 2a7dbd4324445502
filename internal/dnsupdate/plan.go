package dnsupdate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
)

// OwnerPrefix is the first label of the name that holds a hostname's ownership TXT
// record: _orderly-owner.<hostname>. It is a name of its own, not the hostname, so
// that it can sit beside a CNAME (which allows no other record at its name).
const OwnerPrefix = "_orderly-owner"

// OwnerName is the name of host's ownership TXT record.
func OwnerName(host string) string { return OwnerPrefix + "." + host }

// OwnerValue is the ownership TXT value of the ServiceDomain namespace/name, the
// external-dns way.
func OwnerValue(namespace, name string) string {
	return fmt.Sprintf("heritage=orderly,servicedomain=%s/%s", namespace, name)
}

// Desired is the record Orderly wants at a hostname.
type Desired struct {
	// Zone is the zone the update is sent for.
	Zone string
	// Host is the hostname.
	Host string
	// Owner is the ownership TXT value.
	Owner string
	// Values are IP addresses (A and AAAA records) or one hostname (a CNAME record).
	Values []string
	// TTL of the records.
	TTL uint32
}

// Records sorts values into addresses of each family and a canonical name; an
// error when they mix a hostname with anything else.
func Records(values []string) (a, aaaa []string, cname string, err error) {
	for _, v := range values {
		if ip, perr := netip.ParseAddr(v); perr == nil {
			if ip.Zone() != "" {
				// fe80::1%eth0: a record holds the address alone, so the server's
				// answer would never equal the value, and every reconcile would write.
				return nil, nil, "", fmt.Errorf("%q is an address with a zone (%%%s), which a DNS record cannot hold", v, ip.Zone())
			}
			if ip.Is4() || ip.Is4In6() {
				a = append(a, ip.Unmap().String())
			} else {
				aaaa = append(aaaa, ip.String())
			}
			continue
		}
		if len(validation.IsDNS1123Subdomain(strings.TrimSuffix(strings.ToLower(v), "."))) > 0 {
			return nil, nil, "", fmt.Errorf("%q is neither an IP address nor a hostname", v)
		}
		if cname != "" {
			return nil, nil, "", fmt.Errorf("two hostnames (%s, %s): a name has one CNAME", cname, v)
		}
		cname = strings.TrimSuffix(strings.ToLower(v), ".")
	}
	if cname != "" && (len(a) > 0 || len(aaaa) > 0) {
		return nil, nil, "", fmt.Errorf("hostname %s mixed with IP addresses: a CNAME allows no other record", cname)
	}
	slices.Sort(a)
	a = slices.Compact(a)
	slices.Sort(aaaa)
	aaaa = slices.Compact(aaaa)
	return a, aaaa, cname, nil
}

// Describe is the record as status shows it, e.g. "A 192.0.2.1" or "CNAME lb.example.com".
func Describe(values []string) string {
	a, aaaa, cname, err := Records(values)
	if err != nil {
		return ""
	}
	var parts []string
	if len(a) > 0 {
		parts = append(parts, "A "+strings.Join(a, ","))
	}
	if len(aaaa) > 0 {
		parts = append(parts, "AAAA "+strings.Join(aaaa, ","))
	}
	if cname != "" {
		parts = append(parts, "CNAME "+cname)
	}
	return strings.Join(parts, "; ")
}

// Action is what Plan decided.
type Action int

// Actions of Plan.
const (
	// Nothing: the records are as desired.
	Nothing Action = iota
	// Create: the name is free; write the records and the ownership TXT.
	Create
	// Replace: the name is ours; replace its records.
	Replace
	// Conflict: the name holds records of someone else; touch nothing.
	Conflict
)

func (a Action) String() string {
	return [...]string{"Nothing", "Create", "Replace", "Conflict"}[a]
}

// Plan decides what to do at d.Host given what the server holds, and, for
// Conflict, says why in words a person can act on.
func Plan(d Desired, o Observed) (Action, string) {
	if len(o.Owner) > 0 && !slices.Contains(o.Owner, d.Owner) {
		return Conflict, fmt.Sprintf("%s is owned by another writer: TXT %s says %q", d.Host, OwnerName(d.Host), strings.Join(o.Owner, " "))
	}
	if len(o.Owner) > 1 {
		return Conflict, fmt.Sprintf("%s has several ownership TXT records at %s (%q): someone added one by hand; remove the one that is wrong", d.Host, OwnerName(d.Host), strings.Join(o.Owner, " "))
	}
	if len(o.Owner) == 0 {
		if !o.Empty() {
			return Conflict, fmt.Sprintf("%s already has records that Orderly did not write (%s, no ownership TXT at %s); remove them or pick another hostname", d.Host, describeObserved(o), OwnerName(d.Host))
		}
		return Create, ""
	}
	a, aaaa, cname, err := Records(d.Values)
	if err != nil {
		return Conflict, err.Error()
	}
	if slices.Equal(a, o.A) && slices.Equal(aaaa, o.AAAA) && cname == o.CNAME && o.TTL == d.TTL {
		return Nothing, ""
	}
	return Replace, ""
}

func describeObserved(o Observed) string {
	var parts []string
	if len(o.A) > 0 {
		parts = append(parts, "A "+strings.Join(o.A, ","))
	}
	if len(o.AAAA) > 0 {
		parts = append(parts, "AAAA "+strings.Join(o.AAAA, ","))
	}
	if o.CNAME != "" {
		parts = append(parts, "CNAME "+o.CNAME)
	}
	return strings.Join(parts, "; ")
}

// UpdateFor builds the update message of action for d (Create or Replace), with
// prerequisites that hold only in the state Plan saw: for Create, the hostname has
// no A, AAAA or CNAME and the ownership name no TXT; for Replace, the ownership TXT
// is ours.
func UpdateFor(action Action, d Desired) (*dns.Msg, error) {
	a, aaaa, cname, err := Records(d.Values)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 && len(aaaa) == 0 && cname == "" {
		return nil, fmt.Errorf("no value for the record of %s", d.Host)
	}
	if !dns.IsSubDomain(dns.Fqdn(d.Zone), dns.Fqdn(d.Host)) {
		return nil, fmt.Errorf("%s is not in zone %s: an update of the zone cannot write it", d.Host, d.Zone)
	}
	host, owner := dns.Fqdn(d.Host), dns.Fqdn(OwnerName(d.Host))
	// The root has no ownership name beside it ("_prefix.." is no name), and a name
	// that does not pack (an escape that eats the final dot, an empty label) cannot
	// be sent: such a host, or CNAME target, is refused rather than built.
	for _, n := range []string{host, owner} {
		if !packable(n) || n == "." {
			return nil, fmt.Errorf("%q is not a host name an update can write", d.Host)
		}
	}
	if cname != "" && !packable(dns.Fqdn(cname)) {
		return nil, fmt.Errorf("%q is not a CNAME target an update can write", cname)
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(d.Zone))
	switch action {
	case Create:
		m.RRsetNotUsed(rrsets(host, dns.TypeA, dns.TypeAAAA, dns.TypeCNAME))
		m.RRsetNotUsed(rrsets(owner, dns.TypeTXT))
	case Replace:
		m.Used([]dns.RR{ownerTXT(owner, d.Owner, 0)})
		m.RemoveRRset(rrsets(host, dns.TypeA, dns.TypeAAAA, dns.TypeCNAME))
		m.RemoveRRset(rrsets(owner, dns.TypeTXT))
	default:
		return nil, fmt.Errorf("no update for action %s", action)
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: host, Rrtype: t, Class: dns.ClassINET, Ttl: d.TTL}
	}
	var add []dns.RR
	for _, v := range a {
		add = append(add, &dns.A{Hdr: hdr(dns.TypeA), A: netip.MustParseAddr(v).AsSlice()})
	}
	for _, v := range aaaa {
		add = append(add, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: netip.MustParseAddr(v).AsSlice()})
	}
	if cname != "" {
		add = append(add, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: dns.Fqdn(cname)})
	}
	add = append(add, ownerTXT(owner, d.Owner, d.TTL))
	m.Insert(add)
	return m, nil
}

// packable reports whether the fully qualified name n packs into a DNS message.
func packable(n string) bool {
	_, err := dns.PackDomainName(n, make([]byte, 256), 0, nil, false)
	return err == nil
}

// DeleteFor builds the update that removes host's records and its ownership TXT,
// only while the ownership TXT is ownerValue.
func DeleteFor(zone, host, ownerValue string) *dns.Msg {
	h, owner := dns.Fqdn(host), dns.Fqdn(OwnerName(host))
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	m.Used([]dns.RR{ownerTXT(owner, ownerValue, 0)})
	m.RemoveRRset(rrsets(h, dns.TypeA, dns.TypeAAAA, dns.TypeCNAME))
	m.RemoveRRset(rrsets(owner, dns.TypeTXT))
	return m
}

// ownerTXT is the ownership record of value. A TXT record's strings hold 255 bytes
// each, and a ServiceDomain's namespace and name make values up to 348 bytes: the
// value is cut into strings of 255, which Observe joins again.
func ownerTXT(name, value string, ttl uint32) *dns.TXT {
	var txt []string
	for len(value) > 255 {
		txt, value = append(txt, value[:255]), value[255:]
	}
	txt = append(txt, value)
	return &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: txt}
}

// rrsets are RRs that name the RRsets (name, type) for the prerequisite and removal
// helpers, which read only their headers.
func rrsets(name string, types ...uint16) []dns.RR {
	out := make([]dns.RR, 0, len(types))
	for _, t := range types {
		out = append(out, &dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET}})
	}
	return out
}
