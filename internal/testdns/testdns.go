// Package testdns starts a throwaway authoritative DNS server for tests: Debian's
// bind9 (`named`) on a free loopback port, in a temporary directory, serving one
// test zone that accepts RFC 2136 dynamic updates signed with a TSIG key of its own.
// When named is missing it is installed (as root, with apt-get) or the caller gets an
// error that says how; tests never skip for lack of it.
package testdns

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"orderly.dev/orderly/internal/localproc"
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
	find := func() (string, error) {
		if p, err := exec.LookPath("named"); err == nil {
			return p, nil
		}
		if _, err := os.Stat("/usr/sbin/named"); err == nil {
			return "/usr/sbin/named", nil
		}
		return "", errors.New("named not found")
	}
	if p, err := find(); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("the tests need a DNS server: install it with `%s` (or set %s to a named binary)", InstallCommand, BinEnv)
	}
	if err := localproc.AptInstall("bind9"); err != nil {
		return "", fmt.Errorf("installing bind9: %w", err)
	}
	return find()
}

// Server is a running named serving Zone on Addr, TCP and UDP.
type Server struct {
	// Addr is 127.0.0.1:PORT.
	Addr string
	// Zone is the first zone it serves, without the trailing dot.
	Zone string
	// KeySecret is the TSIG key's secret (base64), for KeyName and KeyAlgorithm.
	KeySecret string
	// Dir holds its configuration, zone file, journal and log.
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts named serving zone (e.g. "int.example.test") and the others, each
// open to updates signed with the key, and returns once it answers. Call Close to
// stop it and remove its files.
func Start(zone string, others ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := localproc.MkdirOwned("orderly-testdns-")
	if err != nil {
		return nil, err
	}
	// named drops privileges to no user when run as root without -u, and reads and
	// writes only in dir.
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	secret := base64.StdEncoding.EncodeToString(raw)
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
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
`, dir, filepath.Join(dir, "named.pid"), port, KeyName, KeyAlgorithm, secret)
	files := map[string]string{}
	for _, z := range append([]string{zone}, others...) {
		conf += fmt.Sprintf(`zone %q {
	type primary;
	file %q;
	update-policy { grant %s zonesub ANY; };
};
`, z, z+".db", KeyName)
		files[z+".db"] = fmt.Sprintf(`$TTL 60
@ IN SOA ns1.%[1]s. hostmaster.%[1]s. ( 1 60 60 600 60 )
@ IN NS ns1.%[1]s.
ns1 IN A 127.0.0.1
`, z)
	}
	files["named.conf"] = conf
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	logFile, err := os.Create(filepath.Join(dir, "named.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	// -g: foreground, log to stderr; -n 1: one worker thread (CI has 2 cores).
	cmd := exec.Command(bin, "-g", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = dir
	// named goes with the test process, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Zone: zone, KeySecret: secret, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := s.Query(zone, dns.TypeSOA); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			log := s.Log()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("named exited while starting; its log:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log := s.Log()
			s.Close()
			return nil, errors.New("named did not answer within 30s; its log:\n" + log)
		}
	}
}

// freePort finds a port free on loopback for both TCP and UDP.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if err == nil {
			_ = u.Close()
			return port, nil
		}
	}
	return 0, errors.New("no port free for both TCP and UDP on 127.0.0.1")
}

// Log is named's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "named.log"))
	return string(b)
}

// Query asks the server (over UDP, as a resolver would) for name's records of type
// t, and returns the answer section's records of that name and type as text values
// (an address, a target without its dot, a TXT's joined strings).
func (s *Server) Query(name string, t uint16) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), t)
	m.RecursionDesired = false
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, _, err := (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).ExchangeContext(ctx, m, s.Addr)
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

// Close stops named and removes its files.
func (s *Server) Close() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.Dir)
}
