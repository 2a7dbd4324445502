// Package bind runs an authoritative DNS server on loopback: Debian's bind9
// (`named`) serving zones that accept RFC 2136 dynamic updates signed with a TSIG
// key of its own. The tests start a throwaway one (Start: a free port, a temporary
// directory); `orderly dev up --with dns` a persistent one (Run with a directory and
// a port). When named is missing it is installed (as root, with apt-get) or the
// caller gets a *standin.MissingError that says how.
package bind

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"orderly.dev/orderly/internal/localproc"
	"orderly.dev/orderly/internal/standin"
)

// BinEnv names a named binary to use instead of Debian's /usr/sbin/named.
const BinEnv = "ORDERLY_NAMED_BIN"

// InstallCommand is what a person runs to install the DNS server.
const InstallCommand = "sudo apt-get install -y bind9"

// KeyName and KeyAlgorithm are the TSIG key's name and algorithm.
const (
	KeyName      = "orderly-test"
	KeyAlgorithm = "hmac-sha256"
)

// Binary finds named; as root on a system with apt-get it installs Debian's bind9
// when it is missing.
func Binary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	return standin.FindOrInstall(standin.LookPath("named", "/usr/sbin/named"), "bind9",
		&standin.MissingError{What: "the DNS server named (Debian's bind9)", Install: InstallCommand, Env: BinEnv})
}

// Options say which server Run runs.
type Options struct {
	// Zones are the zones served (without the trailing dot); the first is
	// Server.Zone. Each accepts updates signed with the key, below every name.
	Zones []string
	// Dir holds the configuration, zone files, journals and log. Empty: a new
	// temporary directory, removed by Close.
	Dir string
	// Port is the TCP and UDP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Detached leaves named running after this process ends (orderly dev up); it
	// is then found again in Dir by the next Run. Otherwise named goes with this
	// process.
	Detached bool
}

// Server is a running named serving Zone on Addr, TCP and UDP.
type Server struct {
	// Addr is 127.0.0.1:PORT.
	Addr string
	// Zone is the first zone it serves, without the trailing dot.
	Zone string
	// KeySecret is the TSIG key's secret (base64), for KeyName and KeyAlgorithm.
	KeySecret string
	// Dir holds its configuration, zone files, journal and log.
	Dir string

	proc    *standin.Process
	tempDir bool
}

// Start starts a throwaway named on a free port serving zone (e.g.
// "int.example.test") and the others, each open to updates signed with the key, and
// returns once it answers. Call Close to stop it and remove its files.
func Start(zone string, others ...string) (*Server, error) {
	return Run(Options{Zones: append([]string{zone}, others...)})
}

// Run starts named as o says, or finds the one a previous Run left running in
// o.Dir (with the same port and zones), and returns once it answers for every zone.
// A persistent server keeps its key and records across restarts.
func Run(o Options) (*Server, error) {
	if len(o.Zones) == 0 {
		return nil, errors.New("bind: no zone to serve")
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{Zone: o.Zones[0], Dir: o.Dir}
	if s.Dir == "" {
		if s.Dir, err = localproc.MkdirOwned("orderly-testdns-"); err != nil {
			return nil, err
		}
		s.tempDir = true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	s.proc = &standin.Process{Name: "named", Dir: s.Dir, Detached: o.Detached}
	if err := s.start(bin, o); err != nil {
		if s.tempDir {
			_ = os.RemoveAll(s.Dir)
		}
		return nil, err
	}
	return s, nil
}

// state is what a persistent server keeps beside its files, to be found again.
type state struct {
	port  int
	zones []string
	key   string
}

func (s *Server) statePath() string { return filepath.Join(s.Dir, "standin.conf") }

func (s *Server) readState() (state, bool) {
	b, err := os.ReadFile(s.statePath())
	if err != nil {
		return state{}, false
	}
	var st state
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "port":
			_, _ = fmt.Sscan(v, &st.port)
		case "zones":
			st.zones = strings.Split(v, ",")
		case "key":
			st.key = v
		}
	}
	return st, st.key != "" && st.port != 0
}

func (s *Server) start(bin string, o Options) error {
	prev, known := s.readState()
	if known && s.proc.Running() {
		if (o.Port == 0 || o.Port == prev.port) && slices.Equal(prev.zones, o.Zones) {
			s.Addr, s.KeySecret = fmt.Sprintf("127.0.0.1:%d", prev.port), prev.key
			if err := s.waitAnswers(o.Zones, 10*time.Second); err == nil {
				return nil
			}
		}
		// Another port or zones, or not answering: start afresh.
		if err := s.proc.Stop(10 * time.Second); err != nil {
			return err
		}
	}
	secret := prev.key
	if secret == "" {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		secret = base64.StdEncoding.EncodeToString(raw)
	}
	port, err := standin.ListenPort(o.Port, true, "the DNS server")
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`options {
	directory %q;
	pid-file %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	allow-transfer { none; };
};
controls { };
key %q {
	algorithm %s;
	secret %q;
};
`, s.Dir, filepath.Join(s.Dir, "named.pid"), port, KeyName, KeyAlgorithm, secret)
	files := map[string]string{}
	for _, z := range o.Zones {
		conf += fmt.Sprintf(`zone %q {
	type primary;
	file %q;
	update-policy { grant %s zonesub ANY; };
};
`, z, z+".db", KeyName)
		// A zone file that exists holds the records of earlier runs (BIND writes the
		// journal into it): kept.
		if _, err := os.Stat(filepath.Join(s.Dir, z+".db")); err == nil && prev.key == secret {
			continue
		}
		files[z+".db"] = fmt.Sprintf(`$TTL 60
@ IN SOA ns1.%[1]s. hostmaster.%[1]s. ( 1 60 60 600 60 )
@ IN NS ns1.%[1]s.
ns1 IN A 127.0.0.1
`, z)
		_ = os.Remove(filepath.Join(s.Dir, z+".db.jnl"))
	}
	files["named.conf"] = conf
	files[filepath.Base(s.statePath())] = fmt.Sprintf("port=%d\nzones=%s\nkey=%s\n", port, strings.Join(o.Zones, ","), secret)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	// -g: foreground, log to stderr; -n 1: one worker thread (CI has 2 cores). named
	// run as root without -u drops no privileges it needs: it reads and writes only in
	// the directory.
	cmd := exec.Command(bin, "-g", "-n", "1", "-c", filepath.Join(s.Dir, "named.conf"))
	cmd.Dir = s.Dir
	if err := s.proc.Start(cmd); err != nil {
		return err
	}
	s.Addr, s.KeySecret = fmt.Sprintf("127.0.0.1:%d", port), secret
	if err := s.waitAnswers(o.Zones, 30*time.Second); err != nil {
		_ = s.proc.Stop(5 * time.Second)
		return err
	}
	return nil
}

func (s *Server) waitAnswers(zones []string, timeout time.Duration) error {
	return s.proc.WaitReady(timeout, func() error {
		for _, z := range zones {
			if _, err := s.Query(z, dns.TypeSOA); err != nil {
				return err
			}
		}
		return nil
	})
}

// Log is named's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.proc.LogFile())
	return string(b)
}

// Pid is named's process id.
func (s *Server) Pid() int { return s.proc.Pid() }

// Query asks the server (over UDP, as a resolver would) for name's records of type
// t, and returns the answer section's records of that name and type as text values
// (an address, a target without its dot, a TXT's joined strings).
func (s *Server) Query(name string, t uint16) ([]string, error) {
	return Query(s.Addr, name, t)
}

// Query asks the server at addr (host:port) as Server.Query does.
func Query(addr, name string, t uint16) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), t)
	m.RecursionDesired = false
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, _, err := (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).ExchangeContext(ctx, m, addr)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("%s %s: %s", dns.TypeToString[t], name, dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		if !strings.EqualFold(rr.Header().Name, dns.Fqdn(name)) || rr.Header().Rrtype != t {
			continue
		}
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		case *dns.CNAME:
			out = append(out, strings.TrimSuffix(v.Target, "."))
		case *dns.TXT:
			out = append(out, strings.Join(v.Txt, ""))
		default:
			out = append(out, rr.String())
		}
	}
	return out, nil
}

// Update sends a signed dynamic update built by build (on a message already set up
// for Zone), as a person with the key would with nsupdate: the tests change and
// delete records by hand with it.
func (s *Server) Update(build func(m *dns.Msg)) error {
	return s.UpdateZone(s.Zone, build)
}

// UpdateZone is Update for another of the server's zones.
func (s *Server) UpdateZone(zone string, build func(m *dns.Msg)) error {
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	build(m)
	name := dns.Fqdn(KeyName)
	m.SetTsig(name, dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second, TsigSecret: map[string]string{name: s.KeySecret}}
	r, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("update refused: %s", dns.RcodeToString[r.Rcode])
	}
	return nil
}

// Stop stops named and keeps its files.
func (s *Server) Stop() error { return s.proc.Stop(10 * time.Second) }

// Close stops named, and removes its files when they are in a temporary directory.
func (s *Server) Close() {
	_ = s.proc.Stop(5 * time.Second)
	if s.tempDir {
		_ = os.RemoveAll(s.Dir)
	}
}
