package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultPollInterval is how often Run checks the files when
// Config.PollInterval is zero.
const DefaultPollInterval = 5 * time.Second

// ErrNoCA is returned by Load when Config.RequireCA is set without a CAFile.
var ErrNoCA = errors.New("tlsfiles: a CA file is required")

// Config names the files of one identity. Paths are read by Load and by
// every reload; relative paths are relative to the working directory.
type Config struct {
	// CertFile is a PEM certificate chain, leaf first. With KeyFile; both
	// or neither.
	CertFile string
	// KeyFile is the PEM private key of the leaf certificate.
	KeyFile string
	// CAFile is a PEM bundle of CA certificates: the roots a client
	// verifies servers against, and that a server verifies client
	// certificates against. Optional unless RequireCA.
	CAFile string
	// RequireCA makes an empty CAFile an error (mTLS needs one).
	RequireCA bool
	// PollInterval is how often Run compares the files' size and
	// modification time with the last load. 0 means DefaultPollInterval.
	PollInterval time.Duration
}

// Validate reports the first problem with c, or nil. It changes nothing.
func (c Config) Validate() error {
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return errors.New("tlsfiles: certificate and key files go together: give both or neither")
	case c.RequireCA && c.CAFile == "":
		return ErrNoCA
	case c.CertFile == "" && c.CAFile == "":
		return errors.New("tlsfiles: no files given")
	case c.PollInterval < 0:
		return fmt.Errorf("tlsfiles: negative poll interval %v", c.PollInterval)
	}
	return nil
}

// material is one consistent load of the files.
type material struct {
	cert  *tls.Certificate // nil without CertFile
	roots *x509.CertPool   // nil without CAFile
}

// stamp identifies a version of the files: a change in any file's size or
// modification time triggers a reload.
type stamp [3]struct {
	size int64
	mod  time.Time
}

// Store holds the current TLS material. It is safe for concurrent use: the
// configs it returns read the current material on every handshake.
type Store struct {
	cfg    Config
	logger *slog.Logger

	mu struct {
		sync.Mutex
		cur   material
		stamp stamp
	}
}

// Load validates cfg, reads the files once and returns a Store serving them.
// logger may be nil. It fails if a file is missing or unparsable, or if the
// key does not match the certificate.
func Load(cfg Config, logger *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	s := &Store{cfg: cfg, logger: logger}
	st := s.stat()
	m, err := s.read()
	if err != nil {
		return nil, err
	}
	s.mu.cur, s.mu.stamp = m, st
	return s, nil
}

// Reload reads the files again and, if they load, serves them from the next
// handshake on. On error the previous material stays in use.
func (s *Store) Reload() error {
	st := s.stat()
	m, err := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.stamp = st
	if err != nil {
		return err
	}
	s.mu.cur = m
	return nil
}

// Run reloads the files whenever their size or modification time changes,
// checking every Config.PollInterval, until ctx ends; it returns ctx's
// error. A failed reload is logged and retried when the files change again.
func (s *Store) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			s.mu.Lock()
			changed := s.stat() != s.mu.stamp
			s.mu.Unlock()
			if !changed {
				continue
			}
			if err := s.Reload(); err != nil {
				s.logger.Error("tls files changed but do not load; the previous certificates stay in use", "err", err)
			} else {
				s.logger.Info("tls files reloaded", "cert", s.cfg.CertFile, "ca", s.cfg.CAFile)
			}
		}
	}
}

func (s *Store) stat() stamp {
	var st stamp
	for i, p := range []string{s.cfg.CertFile, s.cfg.KeyFile, s.cfg.CAFile} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			st[i].size, st[i].mod = fi.Size(), fi.ModTime()
		}
	}
	return st
}

func (s *Store) read() (material, error) {
	var m material
	if s.cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
		if err != nil {
			return material{}, fmt.Errorf("tlsfiles: load %s and %s: %w", s.cfg.CertFile, s.cfg.KeyFile, err)
		}
		m.cert = &cert
	}
	if s.cfg.CAFile != "" {
		pem, err := os.ReadFile(s.cfg.CAFile)
		if err != nil {
			return material{}, fmt.Errorf("tlsfiles: read CA: %w", err)
		}
		m.roots = x509.NewCertPool()
		if !m.roots.AppendCertsFromPEM(pem) {
			return material{}, fmt.Errorf("tlsfiles: %s holds no PEM certificate", s.cfg.CAFile)
		}
	}
	return m, nil
}

func (s *Store) current() material {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cur
}
