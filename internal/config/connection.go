package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Engines a [database] connection URL can name.
const (
	EngineSQLite   = "sqlite"
	EnginePostgres = "postgres"
	EngineMySQL    = "mysql"
)

// Connection is a [database] connection URL translated for the Go driver of its
// engine.
type Connection struct {
	Engine string // EngineSQLite, EnginePostgres or EngineMySQL
	// DSN is what the engine's driver opens:
	//   - sqlite: the absolute path of the database file; the store adds the
	//     "file:" prefix and its pragmas;
	//   - postgres: a postgres:// URL, as pgx parses it;
	//   - mysql: a go-sql-driver/mysql DSN, user:password@tcp(host:port)/db?parseTime=true...
	DSN string
}

// acceptedConnections is said in every error about the URL's form.
const acceptedConnections = "want sqlite:////absolute/path.db, postgresql://user:password@host:5432/database " +
	"or mysql://user:password@host:3306/database (mysql+pymysql:// is read as mysql://)"

// ParseConnection translates a [database] connection URL. The URLs are the ones
// SQLAlchemy reads, so a connection string written for a SQLAlchemy-based tool
// keeps working. Errors name the URL with any password masked.
func ParseConnection(s string) (Connection, error) {
	c, err := parseConnection(s)
	if err != nil {
		return Connection{}, fmt.Errorf("database connection %q: %w", RedactURL(s), err)
	}
	return c, nil
}

// parseConnection does the work of ParseConnection; its errors never quote the
// URL, so that [Parse] can name the value its own way.
func parseConnection(s string) (Connection, error) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found {
		return Connection{}, errors.New("not a URL: " + acceptedConnections)
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		return sqliteConnection(rest)
	case "postgresql", "postgres":
		// pgx reads both schemes, and more forms of URL than net/url does (several
		// hosts, for one), so the URL goes to pgx unchanged: pgx is the judge.
		return Connection{Engine: EnginePostgres, DSN: "postgres://" + rest}, nil
	case "mysql", "mysql+pymysql":
		return mysqlConnection(s)
	default:
		return Connection{}, fmt.Errorf("unsupported scheme %q: %s", scheme, acceptedConnections)
	}
}

// sqliteConnection reads what follows "sqlite://": SQLAlchemy's form is an empty
// host, a slash, then the path, so an absolute path makes four slashes in all.
func sqliteConnection(rest string) (Connection, error) {
	path, found := strings.CutPrefix(rest, "/")
	switch {
	case rest == "" || path == "":
		return Connection{}, errors.New("no database file (an in-memory database would lose every job): want sqlite:////absolute/path.db")
	case !found:
		return Connection{}, errors.New("a sqlite URL has no host: want sqlite:////absolute/path.db")
	case !filepath.IsAbs(path):
		return Connection{}, fmt.Errorf("relative path %q: want four slashes and an absolute path, sqlite:////absolute/path.db", path)
	case strings.ContainsAny(path, "?#%"):
		// The store opens "file:<path>?<pragmas>", where these characters would
		// start the query, start a fragment, or be decoded.
		return Connection{}, fmt.Errorf("path %q: '?', '#' and '%%' are not supported in a sqlite path (the manager sets its own pragmas)", path)
	case strings.HasSuffix(path, "/"):
		return Connection{}, fmt.Errorf("path %q is a directory: want the path of the database file", path)
	}
	return Connection{Engine: EngineSQLite, DSN: filepath.Clean(path)}, nil
}

// mysqlDriverParams are the query parameters go-sql-driver/mysql itself reads.
// Any other parameter would be sent to the server as a session variable, and a
// PyMySQL option such as ssl_ca would silently do nothing here, so it is an
// error instead.
var mysqlDriverParams = map[string]bool{
	"allowAllFiles": true, "allowCleartextPasswords": true, "allowFallbackToPlaintext": true,
	"allowNativePasswords": true, "allowOldPasswords": true, "charset": true, "checkConnLiveness": true,
	"clientFoundRows": true, "collation": true, "columnsWithAlias": true, "compress": true,
	"connectionAttributes": true, "interpolateParams": true, "loc": true, "maxAllowedPacket": true,
	"multiStatements": true, "parseTime": true, "readTimeout": true, "rejectReadOnly": true,
	"serverPubKey": true, "timeTruncate": true, "timeout": true, "tls": true, "writeTimeout": true,
}

// mysqlConnection turns mysql://user:password@host:port/database?params into
// go-sql-driver's user:password@tcp(host:port)/database?params. User name and
// password arrive percent-encoded, as SQLAlchemy wants them, and leave decoded.
// parseTime is always on: the store reads DATETIME columns as time.Time.
func mysqlConnection(s string) (Connection, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse's error quotes the URL, password included: say what to fix instead.
		return Connection{}, errors.New("not a valid URL: percent-encode characters such as '@', ':', '/' and '#' in the user name and password")
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return Connection{}, fmt.Errorf("database name %q: want mysql://user:password@host:3306/database", cfg.DBName)
	}

	var params []string
	unixSocket := ""
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			return Connection{}, fmt.Errorf("query parameter %q: bad percent-encoding", rawKey)
		}
		switch {
		case key == "unix_socket": // PyMySQL's way to name a socket
			if unixSocket, err = url.QueryUnescape(rawValue); err != nil || unixSocket == "" {
				return Connection{}, errors.New("unix_socket: want the socket's path")
			}
		case mysqlDriverParams[key]:
			params = append(params, pair)
		default:
			return Connection{}, fmt.Errorf("query parameter %q is not one go-sql-driver/mysql reads "+
				"(charset, collation, loc, tls, timeout, readTimeout, writeTimeout, ...)", key)
		}
	}

	switch {
	case unixSocket != "" && u.Host != "":
		return Connection{}, errors.New("both a host and unix_socket: want one of them")
	case unixSocket != "":
		cfg.Net, cfg.Addr = "unix", unixSocket
	case u.Hostname() == "":
		return Connection{}, errors.New("no host: want mysql://user:password@host:3306/database")
	default:
		port := u.Port()
		if port == "" {
			port = "3306"
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(u.Hostname(), port)
	}

	// Let the driver read the parameters, so that a bad value is caught here
	// rather than when the store first connects.
	dsn := cfg.FormatDSN()
	if len(params) > 0 {
		dsn += "?" + strings.Join(params, "&")
	}
	parsed, err := mysql.ParseDSN(dsn)
	if err != nil {
		return Connection{}, fmt.Errorf("query parameters: %w", err)
	}
	if parsed.User != cfg.User || parsed.Passwd != cfg.Passwd || parsed.DBName != cfg.DBName {
		// The driver's DSN splits the user name at its first ':', for one.
		return Connection{}, errors.New("the user name, password or database name cannot be written in a go-sql-driver/mysql DSN")
	}
	parsed.ParseTime = true
	return Connection{Engine: EngineMySQL, DSN: parsed.FormatDSN()}, nil
}

// RedactURL masks the password of a connection URL, in its user info and in any
// password query parameter, for errors and logs. It works on the text rather than
// on a parsed URL so that it also masks URLs net/url refuses; when in doubt it
// masks too much.
func RedactURL(s string) string {
	const mask = "xxxxx"
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	// User info ends at the last '@': an unencoded '@' in a password comes before it.
	if at := strings.LastIndex(s[start:], "@"); at >= 0 {
		userinfo := s[start : start+at]
		if colon := strings.IndexByte(userinfo, ':'); colon >= 0 {
			s = s[:start+colon+1] + mask + s[start+at:]
		}
	}
	base, query, found := strings.Cut(s, "?")
	if !found {
		return s
	}
	pairs := strings.Split(query, "&")
	for i, pair := range pairs {
		key, _, _ := strings.Cut(pair, "=")
		lower := strings.ToLower(key)
		if strings.Contains(lower, "password") || strings.Contains(lower, "passwd") {
			pairs[i] = key + "=" + mask
		}
	}
	return base + "?" + strings.Join(pairs, "&")
}
