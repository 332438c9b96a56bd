package tlsreload

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload/tlstest"
)

// serialServed makes a TLS handshake with a server that uses r, as a client
// that trusts only ca, and returns the serial number of the certificate it got.
func serialServed(t *testing.T, r *Reloader, ca *tlstest.CA) int64 {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestReloadWhenFilesChange(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca := tlstest.NewCA(t)
	first := ca.WritePair(certFile, keyFile)
	var logged bytes.Buffer
	r, err := New(certFile, keyFile, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.CheckInterval = 0 // look at the files at every handshake
	if got := serialServed(t, r, ca); got != first {
		t.Fatalf("serial %d served, want %d", got, first)
	}

	second := ca.WritePair(certFile, keyFile)
	if got := serialServed(t, r, ca); got != second {
		t.Fatalf("after rotation: serial %d served, want the new %d", got, second)
	}

	// A half-written rotation: the key of another pair. The previous pair stays.
	_, otherKey, _ := ca.Issue()
	if err := os.WriteFile(keyFile, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := serialServed(t, r, ca); got != second {
		t.Fatalf("after a mismatched key: serial %d served, want the previous %d", got, second)
	}
	if !strings.Contains(logged.String(), "do not load") {
		t.Errorf("a pair that does not load was not logged:\n%s", logged.String())
	}
}

func TestNewRefusesBadPair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := New(certFile, keyFile, slog.Default()); err == nil || !strings.Contains(err.Error(), "cert.pem") {
		t.Errorf("missing files: error %v, want one naming cert.pem", err)
	}
	if err := os.WriteFile(certFile, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(certFile, keyFile, slog.Default()); err == nil {
		t.Error("a pair that is not PEM loaded")
	}
}

func TestOldTLSRefused(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca := tlstest.NewCA(t)
	ca.WritePair(certFile, keyFile)
	r, err := New(certFile, keyFile, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	_, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
		MaxVersion: tls.VersionTLS11})
	if err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
}
