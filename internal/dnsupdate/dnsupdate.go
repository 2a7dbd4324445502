// Package dnsupdate writes DNS records with RFC 2136 dynamic updates signed with TSIG
// (RFC 8945), and reads them back with ordinary queries, to a DNS server such as
// BIND. Every record it writes is paired with an ownership TXT record, the way
// external-dns marks its records, and every update carries RFC 2136 prerequisites
// that make the server refuse it when the name is not in the state it was observed
// in: a record someone else wrote meanwhile is never overwritten or deleted.
package dnsupdate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DefaultTimeout bounds one exchange with the server when Client.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// ErrPrerequisite is returned when the server refused an update because the name
// was not as observed (RFC 2136 prerequisites): someone else changed it meanwhile.
var ErrPrerequisite = errors.New("the DNS server refused the update: the records changed since they were read")

// Algorithms are the TSIG algorithms a key may name, by their usual names.
var Algorithms = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha224": dns.HmacSHA224,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// Key is a TSIG key.
type Key struct {
	// Name is the key's name, as the server knows it.
	Name string
	// Algorithm is one of Algorithms' keys; hmac-sha256 when empty.
	Algorithm string
	// Secret is the key, base64-encoded.
	Secret string
}

// Validate says what is wrong with k, without quoting its secret.
func (k Key) Validate() error {
	if k.Name == "" {
		return errors.New("the TSIG key has no name")
	}
	if k.Secret == "" {
		return errors.New("the TSIG key has no secret")
	}
	if _, ok := Algorithms[k.algorithm()]; !ok {
		return fmt.Errorf("unknown TSIG algorithm %q (one of hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512)", k.Algorithm)
	}
	return nil
}

func (k Key) algorithm() string {
	if k.Algorithm == "" {
		return "hmac-sha256"
	}
	return strings.ToLower(strings.TrimSuffix(k.Algorithm, "."))
}

// Client talks to one DNS server.
type Client struct {
	// Server is host:port.
	Server string
	// Key signs updates; queries are not signed.
	Key Key
	// Timeout bounds each exchange; DefaultTimeout when zero.
	Timeout time.Duration
}

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// Observed is what the server holds at a hostname and at its ownership name.
type Observed struct {
	// A and AAAA are the addresses at the hostname, sorted.
	A, AAAA []string
	// CNAME is the hostname's canonical name, without the trailing dot; "" when none.
	CNAME string
	// Owner are the TXT values at the ownership name.
	Owner []string
	// TTL is the TTL of the hostname's records (the smallest seen); 0 when none.
	TTL uint32
}

// Empty is true when the hostname has no A, AAAA or CNAME record.
func (o Observed) Empty() bool {
	return len(o.A) == 0 && len(o.AAAA) == 0 && o.CNAME == ""
}

// Observe reads the A, AAAA and CNAME records of host and the TXT records of
// ownerName from the server (over TCP: the answers are authoritative and not cut).
func (c *Client) Observe(ctx context.Context, host, ownerName string) (Observed, error) {
	var o Observed
	for _, q := range []struct {
		name string
		typ  uint16
	}{{host, dns.TypeA}, {host, dns.TypeAAAA}, {host, dns.TypeCNAME}, {ownerName, dns.TypeTXT}} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(q.name), q.typ)
		m.RecursionDesired = false
		r, err := c.exchange(ctx, m, false)
		if err != nil {
			return Observed{}, err
		}
		if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
			return Observed{}, fmt.Errorf("querying %s %s: the server answered %s", dns.TypeToString[q.typ], q.name, dns.RcodeToString[r.Rcode])
		}
		for _, rr := range r.Answer {
			if !strings.EqualFold(rr.Header().Name, dns.Fqdn(q.name)) || rr.Header().Rrtype != q.typ {
				continue
			}
			if q.typ != dns.TypeTXT && (o.TTL == 0 || rr.Header().Ttl < o.TTL) {
				o.TTL = rr.Header().Ttl
			}
			switch v := rr.(type) {
			case *dns.A:
				o.A = append(o.A, v.A.String())
			case *dns.AAAA:
				o.AAAA = append(o.AAAA, v.AAAA.String())
			case *dns.CNAME:
				o.CNAME = strings.TrimSuffix(v.Target, ".")
			case *dns.TXT:
				o.Owner = append(o.Owner, strings.Join(v.Txt, ""))
			}
		}
	}
	slices.Sort(o.A)
	slices.Sort(o.AAAA)
	slices.Sort(o.Owner)
	return o, nil
}

// Update sends one signed dynamic update of zone.
func (c *Client) Update(ctx context.Context, m *dns.Msg) error {
	r, err := c.exchange(ctx, m, true)
	if err != nil {
		return err
	}
	switch r.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeYXDomain, dns.RcodeYXRrset, dns.RcodeNXRrset, dns.RcodeNameError:
		return ErrPrerequisite
	case dns.RcodeNotAuth:
		return fmt.Errorf("the DNS server answered NOTAUTH: it is not authoritative for zone %s, or it does not accept the TSIG key %q", strings.TrimSuffix(m.Question[0].Name, "."), c.Key.Name)
	case dns.RcodeRefused:
		return fmt.Errorf("the DNS server REFUSED the update of zone %s: its update-policy does not allow key %q to change these names", strings.TrimSuffix(m.Question[0].Name, "."), c.Key.Name)
	default:
		return fmt.Errorf("the DNS server answered %s to the update of zone %s", dns.RcodeToString[r.Rcode], strings.TrimSuffix(m.Question[0].Name, "."))
	}
}

func (c *Client) exchange(ctx context.Context, m *dns.Msg, sign bool) (*dns.Msg, error) {
	dc := &dns.Client{Net: "tcp", Timeout: c.timeout()}
	if sign {
		if err := c.Key.Validate(); err != nil {
			return nil, err
		}
		name := dns.Fqdn(strings.ToLower(c.Key.Name))
		dc.TsigSecret = map[string]string{name: c.Key.Secret}
		m.SetTsig(name, Algorithms[c.Key.algorithm()], 300, time.Now().Unix())
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	r, _, err := dc.ExchangeContext(ctx, m, c.Server)
	if err != nil {
		var te *net.OpError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("the DNS server %s cannot be reached: %w", c.Server, err)
		}
		if errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrAuth) {
			return nil, fmt.Errorf("the DNS server %s did not accept the TSIG signature of key %q (check the key's name, algorithm and secret): %w", c.Server, c.Key.Name, err)
		}
		return nil, fmt.Errorf("asking the DNS server %s: %w", c.Server, err)
	}
	return r, nil
}

// What CheckZone found wrong, for a zone's conditions.
var (
	// ErrUnreachable: the server did not answer (refused, timed out).
	ErrUnreachable = errors.New("the DNS server cannot be reached")
	// ErrKeyRejected: the server does not accept the TSIG key (name, algorithm or
	// secret wrong).
	ErrKeyRejected = errors.New("the DNS server does not accept the TSIG key")
	// ErrNotAuthoritative: the server answers, but not as the zone's primary.
	ErrNotAuthoritative = errors.New("the DNS server is not authoritative for the zone")
)

// CheckZone asks the server for the zone's SOA in a query signed with the key (a
// query changes nothing), and says whether records can be written there: nil when
// the server answers authoritatively and accepts the key; otherwise an error that
// wraps ErrUnreachable, ErrKeyRejected or ErrNotAuthoritative.
func (c *Client) CheckZone(ctx context.Context, zone string) error {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	m.RecursionDesired = false
	r, err := c.exchange(ctx, m, true)
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	case errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrAuth):
		return fmt.Errorf("%w: %w", ErrKeyRejected, err)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if t := r.IsTsig(); r.Rcode == dns.RcodeNotAuth || (t != nil && t.Error != dns.RcodeSuccess) {
		why := dns.RcodeToString[r.Rcode]
		if t != nil && t.Error != dns.RcodeSuccess {
			why = dns.RcodeToString[int(t.Error)]
		}
		return fmt.Errorf("%w %q (it answered %s; check the key's name, algorithm and secret)", ErrKeyRejected, c.Key.Name, why)
	}
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("%w %s: it answered %s to a query for its SOA", ErrNotAuthoritative, zone, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if _, ok := rr.(*dns.SOA); ok && r.Authoritative && strings.EqualFold(rr.Header().Name, dns.Fqdn(zone)) {
			return nil
		}
	}
	return fmt.Errorf("%w %s: its answer to a query for the zone's SOA is not an authoritative SOA of the zone", ErrNotAuthoritative, zone)
}
