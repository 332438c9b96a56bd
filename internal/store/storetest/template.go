package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"
)

// NewMigratedDatabase is a database on engine at the latest schema, as Open
// leaves a new one, the test's own until it ends: on a server, a copy of the
// engine's migrated template from the pool testdb.Claim keeps (emptied and
// given the template's rows back for each test), on SQLite a copy of the
// template's file. A test pays for neither the migrations nor, on a server,
// a CREATE DATABASE; nothing it writes is seen by another test
// (TestMigratedDatabasesShareNoRows).
func NewMigratedDatabase(t testing.TB, engine string) Database {
	t.Helper()
	if engine == config.EngineSQLite {
		file, err := sqliteTemplate()
		if err != nil {
			t.Fatalf("SQLite template: %v", err)
		}
		path := filepath.Join(t.TempDir(), "afm.db")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatalf("copy the SQLite template: %v", err)
		}
		return Database{Engine: engine, URL: "sqlite:///" + path, DSN: path}
	}
	env, ok := serverEnvs[engine]
	if !ok {
		t.Fatalf("unknown engine %q", engine)
	}
	admin := testdb.ServerURL(t, env)
	key, template, err := serverTemplate(engine, admin)
	if err != nil {
		t.Fatalf("%s template: %v", engine, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, release, err := testdb.Claim(ctx, admin, key, template)
	if err != nil {
		t.Fatalf("%s test database: %v", engine, err)
	}
	t.Cleanup(release)
	return db
}

// templates holds each template once made: the database on a server (by
// server URL), the SQLite file's bytes.
var templates struct {
	sync.Mutex
	server map[string]*onceTemplate
	sqlite onceTemplate
}

type onceTemplate struct {
	once sync.Once
	key  string
	db   Database
	file []byte
	err  error
}

func serverTemplate(engine, admin string) (key string, template Database, err error) {
	templates.Lock()
	if templates.server == nil {
		templates.server = map[string]*onceTemplate{}
	}
	o := templates.server[admin]
	if o == nil {
		o = &onceTemplate{}
		templates.server[admin] = o
	}
	templates.Unlock()
	o.once.Do(func() {
		if o.key, o.err = templateKey(engine); o.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		o.db, o.err = testdb.Template(ctx, admin, o.key, migrate)
	})
	return o.key, o.db, o.err
}

func sqliteTemplate() ([]byte, error) {
	o := &templates.sqlite
	o.once.Do(func() {
		dir, err := os.MkdirTemp("", "afm-template-")
		if err != nil {
			o.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "afm.db")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if o.err = migrate(ctx, Database{Engine: config.EngineSQLite, DSN: path}); o.err != nil {
			return
		}
		// Closed, the store leaves its whole state in the one file.
		if _, err := os.Stat(path + "-wal"); err == nil {
			o.err = fmt.Errorf("%s-wal left after the store closed", path)
			return
		}
		o.file, o.err = os.ReadFile(path)
	})
	return o.file, o.err
}

// migrate runs every migration on db, as Open does.
func migrate(ctx context.Context, db Database) error {
	s, err := storeopen.Open(ctx, db.Engine, db.DSN, true, store.Rules{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	return s.DB().Close()
}

// templateKey is a digest of engine's migrations: a changed or added
// migration names a template of its own.
func templateKey(engine string) (string, error) {
	fsys, err := migrations.FS(engine)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	err = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digest of the %s migrations: %w", engine, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
