package testpg

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Fake is a loopback TCP listener that plays a PostgreSQL server gone wrong, for
// tests of what Orderly does with a server that never answers, stalls after the
// login, or is not the server it claims to be.
type Fake struct {
	Host string
	Port int32

	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	// passwords are the passwords clients sent, in plaintext, to a PasswordCatcher.
	passwords []string
	accepted  int
	wg        sync.WaitGroup
}

// Silent accepts connections and never sends a byte.
func Silent() (*Fake, error) { return serve(func(net.Conn, *Fake) {}) }

// Stalling answers the start-up and accepts the login, then never answers a query:
// a server whose backends hang (a lock wait, a stuck disk) while it still accepts
// connections.
func Stalling() (*Fake, error) {
	return serve(func(c net.Conn, _ *Fake) {
		be := pgproto3.NewBackend(c, c)
		if !startup(c, be) {
			return
		}
		be.Send(&pgproto3.AuthenticationOk{})
		for k, v := range map[string]string{"server_version": "15.0", "client_encoding": "UTF8", "standard_conforming_strings": "on",
			"DateStyle": "ISO, MDY", "integer_datetimes": "on", "TimeZone": "UTC"} {
			be.Send(&pgproto3.ParameterStatus{Name: k, Value: v})
		}
		be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		if be.Flush() != nil {
			return
		}
		// Read whatever comes, answer nothing.
		_, _ = io.Copy(io.Discard, c)
	})
}

// PasswordCatcher asks every client for its password in plaintext (as a server
// configured with the password method may) and records what it is sent: a host
// someone pointed a DatabaseServer at to steal the admin credentials.
func PasswordCatcher() (*Fake, error) {
	return serve(func(c net.Conn, f *Fake) {
		be := pgproto3.NewBackend(c, c)
		if !startup(c, be) {
			return
		}
		be.Send(&pgproto3.AuthenticationCleartextPassword{})
		if be.Flush() != nil || be.SetAuthType(pgproto3.AuthTypeCleartextPassword) != nil {
			return
		}
		msg, err := be.Receive()
		if err != nil {
			return
		}
		if pw, ok := msg.(*pgproto3.PasswordMessage); ok {
			f.mu.Lock()
			f.passwords = append(f.passwords, pw.Password)
			f.mu.Unlock()
		}
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
		_ = be.Flush()
	})
}

// startup reads the client's start-up, refusing TLS and GSS encryption, and says
// whether a start-up message came.
func startup(c net.Conn, be *pgproto3.Backend) bool {
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return false
		}
		switch msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.Write([]byte("N")); err != nil {
				return false
			}
		case *pgproto3.StartupMessage:
			return true
		default:
			return false
		}
	}
}

func serve(handle func(net.Conn, *Fake)) (*Fake, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Fake{Host: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port), l: l}
	f.wg.Go(func() {
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.accepted++
			f.mu.Unlock()
			f.wg.Go(func() { handle(c, f) })
		}
	})
	return f, nil
}

// Passwords returns the passwords clients sent so far.
func (f *Fake) Passwords() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.passwords...)
}

// Accepted is how many connections were accepted so far.
func (f *Fake) Accepted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

// Close stops listening and closes every connection.
func (f *Fake) Close() {
	_ = f.l.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
