package manager

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// TestOpenSMUser: an [opensm] user that does not exist stops the start,
// naming the key; unset, a root manager warns that OpenSM runs as root.
func TestOpenSMUser(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := openSMUser("afm-no-such-user", config.DriverProcess, log); err == nil ||
		!strings.Contains(err.Error(), `[opensm] user: opensm: user "afm-no-such-user"`) {
		t.Errorf("unknown user: %v, want an error naming [opensm] user and the user", err)
	}
	u, err := openSMUser("", config.DriverProcess, log)
	if u != nil || err != nil {
		t.Errorf("unset: %v, %v, want the manager's own user", u, err)
	}
	warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "[opensm] user = afm-opensm")
	if warned != (os.Geteuid() == 0) {
		t.Errorf("root %v, warned %v: %s", os.Geteuid() == 0, warned, logs.String())
	}
	// OpenSM's container does not run as the manager: no warning.
	logs.Reset()
	if _, err := openSMUser("", config.DriverManaged, log); err != nil || logs.Len() > 0 {
		t.Errorf("managed, unset: %v, logged %q; want nothing", err, logs.String())
	}
}

// TestHiddenFromOpenSM: the server's configuration file and a SQLite
// database are hidden from OpenSM; a server database has no file to hide.
func TestHiddenFromOpenSM(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		connection string
		want       []string
	}{
		{"sqlite:////var/lib/afm/afm.db", []string{filepath.Join(dir, "afm.conf"), "/var/lib/afm/afm.db"}},
		{"postgresql://afm:pw@db/afm", []string{filepath.Join(dir, "afm.conf")}},
	} {
		path := filepath.Join(dir, "afm.conf")
		text := "[api]\ntoken = s3cret-token-0123456\n[database]\nconnection = " + tc.connection + "\n"
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg.File = path // as the server sets it
		if got := hiddenFromOpenSM(cfg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: hidden %q, want %q", tc.connection, got, tc.want)
		}
	}
}
