package config

import (
	"strings"
	"testing"
)

func TestParseConnection(t *testing.T) {
	tests := []struct {
		url        string
		wantEngine string
		wantDSN    string
	}{
		// sqlite: four slashes, an absolute path; the store adds "file:" and pragmas.
		{"sqlite:////var/lib/alternative-fabric-manager/afm.db", EngineSQLite, "/var/lib/alternative-fabric-manager/afm.db"},
		{"SQLite:////srv/afm/../afm/afm.db", EngineSQLite, "/srv/afm/afm.db"},
		{"sqlite://///var/lib/afm.db", EngineSQLite, "/var/lib/afm.db"},

		// postgres: pgx reads the URL itself; both schemes become postgres://.
		{"postgresql://afm:s3cret@db.example.com:5432/afm?sslmode=verify-full", EnginePostgres,
			"postgres://afm:s3cret@db.example.com:5432/afm?sslmode=verify-full"},
		{"postgres://afm@db/afm", EnginePostgres, "postgres://afm@db/afm"},
		{"postgresql://afm@db1:5432,db2:5432/afm?target_session_attrs=read-write", EnginePostgres,
			"postgres://afm@db1:5432,db2:5432/afm?target_session_attrs=read-write"},

		// mysql: go-sql-driver's form, user and password decoded, port 3306 by default,
		// parseTime always on, the driver's own parameters kept.
		{"mysql+pymysql://afm:p%40ss%3Aw%2Frd@db.example.com/afm?charset=utf8mb4", EngineMySQL,
			"afm:p@ss:w/rd@tcp(db.example.com:3306)/afm?charset=utf8mb4&parseTime=true"},
		{"mysql://afm:s3cret@db.example.com:3307/afm", EngineMySQL,
			"afm:s3cret@tcp(db.example.com:3307)/afm?parseTime=true"},
		{"mysql://afm:pw@[::1]/afm?parseTime=false&tls=true&timeout=5s", EngineMySQL,
			"afm:pw@tcp([::1]:3306)/afm?parseTime=true&timeout=5s&tls=true"},
		{"mysql://afm@/afm?unix_socket=%2Frun%2Fmysqld%2Fmysqld.sock", EngineMySQL,
			"afm@unix(/run/mysqld/mysqld.sock)/afm?parseTime=true"},
		{"MYSQL+PYMYSQL://afm:pw@db/afm", EngineMySQL, "afm:pw@tcp(db:3306)/afm?parseTime=true"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := ParseConnection(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got.Engine != tt.wantEngine || got.DSN != tt.wantDSN {
				t.Errorf("got %+v, want {Engine:%s DSN:%s}", got, tt.wantEngine, tt.wantDSN)
			}
		})
	}
}

func TestParseConnectionErrors(t *testing.T) {
	tests := []struct {
		url  string
		want []string // each must be in the error
	}{
		{"afm:s3cret@db/afm", []string{`"afm:xxxxx@db/afm"`, "not a URL"}},
		{"mongodb://afm:s3cret@db/afm", []string{`"mongodb://afm:xxxxx@db/afm"`, `unsupported scheme "mongodb"`}},
		{"sqlite://", []string{"no database file"}},
		{"sqlite:///", []string{"no database file"}},
		{"sqlite:///afm.db", []string{`relative path "afm.db"`}},
		{"sqlite://host/afm.db", []string{"has no host"}},
		{"sqlite:////var/lib/afm.db?mode=ro", []string{"the manager sets its own pragmas"}},
		{"sqlite:////var/lib/100%.db", []string{"not supported in a sqlite path"}},
		{"sqlite:////var/lib/afm/", []string{"is a directory"}},
		{"mysql://afm:s3cret@db.example.com/", []string{`database name ""`}},
		{"mysql://afm:s3cret@db.example.com/a/b", []string{`database name "a/b"`}},
		{"mysql://afm:s3cret@/afm", []string{`"mysql://afm:xxxxx@/afm"`, "no host"}},
		{"mysql://afm:s3cret@db/afm?unix_socket=/run/mysqld.sock", []string{"both a host and unix_socket"}},
		{"mysql://afm:s3cret@db/afm?ssl_ca=/etc/ca.pem", []string{`query parameter "ssl_ca"`}},
		{"mysql://afm:s3cret@db/afm?strict=true", []string{`query parameter "strict"`}},
		{"mysql://afm:s3cret@db/afm?timeout=soon", []string{"query parameters:", "soon"}},
		{"mysql://afm:s3cret@db/afm?tls=my-own-config", []string{"query parameters:", "my-own-config"}},
		{"mysql://afm:s3c/ret@db/afm", []string{`"mysql://afm:xxxxx@db/afm"`, "percent-encode"}},
		{"mysql://afm:s3c#ret@db/afm", []string{`"mysql://afm:xxxxx@db/afm"`, "percent-encode"}},
		{"mysql://a%3Ab:s3cret@db/afm", []string{"cannot be written in a go-sql-driver/mysql DSN"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := ParseConnection(tt.url)
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			for _, secret := range []string{"s3cret", "ret@", "s3c"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows part of the password", err)
				}
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ url, want string }{
		{"sqlite:////var/lib/afm.db", "sqlite:////var/lib/afm.db"},
		{"postgresql://afm@db/afm", "postgresql://afm@db/afm"},
		{"postgresql://afm:s3cret@db/afm", "postgresql://afm:xxxxx@db/afm"},
		{"mysql://afm:s3@c:ret@db/afm", "mysql://afm:xxxxx@db/afm"},
		{"postgres://db/afm?user=afm&password=s3cret&sslmode=require", "postgres://db/afm?user=afm&password=xxxxx&sslmode=require"},
		{"afm:s3cret@tcp(db)/afm", "afm:xxxxx@tcp(db)/afm"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.url); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}
