package mysql

import (
	"net"
	"net/url"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

// sslModes maps libpq's sslmode (the DatabaseServer's) onto MySQL's ssl-mode (the
// uri's and Connector/J's sslMode) and the Go driver's tls parameter.
var sslModes = map[string]struct{ mysql, goTLS string }{
	"disable":     {"DISABLED", "false"},
	"allow":       {"PREFERRED", "preferred"},
	"prefer":      {"PREFERRED", "preferred"},
	"require":     {"REQUIRED", "skip-verify"},
	"verify-ca":   {"VERIFY_CA", "true"},
	"verify-full": {"VERIFY_IDENTITY", "true"},
}

// ConnectionData is the connection Secret of a database on a mysql server: the
// keys of PostgreSQL's (host, port, database, username, password, uri, jdbcUrl,
// ca.crt) in MySQL's forms, and dsn for Go's github.com/go-sql-driver/mysql.
// With verify-ca or verify-full the Go DSN says tls=true, which checks the server
// against the system's CAs: with a private CA (ca.crt), register a TLS config
// under a name of your own (mysql.RegisterTLSConfig) and use tls=<name>.
func ConnectionData(srv database.Server, db database.Database) map[string][]byte {
	port := strconv.Itoa(int(srv.Port))
	hostPort := net.JoinHostPort(srv.Host, port)
	mode, ok := sslModes[srv.EffectiveSSLMode()]
	if !ok {
		mode = sslModes["prefer"]
	}
	uri := url.URL{Scheme: "mysql", User: url.UserPassword(db.Role, db.Password), Host: hostPort, Path: "/" + db.Name,
		RawQuery: url.Values{"ssl-mode": {mode.mysql}}.Encode()}
	jdbc := url.URL{Scheme: "mysql", Host: hostPort, Path: "/" + db.Name,
		RawQuery: url.Values{"user": {db.Role}, "password": {db.Password}, "sslMode": {mode.mysql}}.Encode()}
	data := map[string][]byte{
		datav1alpha1.SecretKeyHost:     []byte(srv.Host),
		datav1alpha1.SecretKeyPort:     []byte(port),
		datav1alpha1.SecretKeyDatabase: []byte(db.Name),
		datav1alpha1.SecretKeyUsername: []byte(db.Role),
		datav1alpha1.SecretKeyPassword: []byte(db.Password),
		datav1alpha1.SecretKeyURI:      []byte(uri.String()),
		datav1alpha1.SecretKeyJDBCURL:  []byte("jdbc:" + jdbc.String()),
		datav1alpha1.SecretKeyDSN:      []byte(DSN(srv.Host, srv.Port, db.Role, db.Password, db.Name, mode.goTLS)),
	}
	if len(srv.CACert) > 0 {
		data[datav1alpha1.SecretKeyCACert] = srv.CACert
	}
	return data
}

// DSN is a github.com/go-sql-driver/mysql data source name.
func DSN(host string, port int32, user, password, database, tls string) string {
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd = user, password
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))), database
	if tls != "false" {
		cfg.TLSConfig = tls
	}
	return cfg.FormatDSN()
}
