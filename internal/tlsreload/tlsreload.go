// Package tlsreload serves a certificate and key pair from files that may be
// replaced while the server runs (certificate rotation by certbot,
// cert-manager, or an operator), without a restart.
//
// At each handshake, at most every CheckInterval, the files are stat'ed; when
// either changed (modification time, size or inode: an atomic rename or a
// symlink swap counts), the pair is loaded again. A pair that does not load
// (half written, mismatched) is logged and the previous one is kept, so a
// rotation caught midway never takes HTTPS down.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultCheckInterval is how often the files are looked at, at most.
const DefaultCheckInterval = 2 * time.Second

// Reloader holds the current pair.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	// CheckInterval is how often, at most, a handshake looks at the files.
	CheckInterval time.Duration

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp
	lastCheck time.Time
}

// fileStamp is what says a file changed.
type fileStamp struct {
	mod   time.Time
	size  int64
	inode uint64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	s := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	return s, nil
}

// New loads the pair once: a server must not start with a pair that does not
// load.
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log, CheckInterval: DefaultCheckInterval}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload loads the pair now. On an error the previous pair stays.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load()
}

func (r *Reloader) load() error {
	r.lastCheck = time.Now()
	var stamp [2]fileStamp
	for i, path := range []string{r.certFile, r.keyFile} {
		s, err := stampOf(path)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		stamp[i] = s
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS: load %s and %s: %w", r.certFile, r.keyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("TLS: %s: %w", r.certFile, err)
	}
	cert.Leaf = leaf
	r.cert, r.stamp = &cert, stamp
	r.log.Info("TLS certificate loaded", "file", r.certFile, "subject", leaf.Subject.String(),
		"serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter.UTC())
	return nil
}

// changed says whether either file differs from the pair loaded.
func (r *Reloader) changed() bool {
	for i, path := range []string{r.certFile, r.keyFile} {
		s, err := stampOf(path)
		if err != nil || s != r.stamp[i] {
			return true
		}
	}
	return false
}

// GetCertificate is tls.Config's: the current pair, reloaded first when the
// files changed.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastCheck) >= r.CheckInterval {
		r.lastCheck = time.Now()
		if r.changed() {
			if err := r.load(); err != nil {
				r.log.Error("TLS certificate files changed but do not load; serving the previous certificate",
					"error", err)
			}
		}
	}
	return r.cert, nil
}

// Config is the server's TLS configuration: TLS 1.2 or newer, the pair from
// the files. Go's default cipher suites for 1.2 are the AEAD ones with forward
// secrecy.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}
