// Package tlsfiles loads TLS material (a certificate chain, its private key
// and a CA bundle) from PEM files, reloads it when the files change, and
// hands out *tls.Config values for servers and clients that always use the
// material loaded last.
//
// It exists so that every weir listener and dialer (the public gRPC and HTTP
// listeners, the node-to-node peer plane) rotates certificates the same way:
// replace the files, and new handshakes use them within one poll interval.
// Connections already established keep the certificates they were made with.
//
// Usage:
//
//	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: "node.crt", KeyFile: "node.key", CAFile: "ca.crt"}, logger)
//	if err != nil { ... }
//	go s.Run(ctx) // poll the files until ctx ends
//	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(s.ServerConfig(true))))
//	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(s.ClientCredentials("")))
//
// The caller's duties: call Run (or Reload) for rotation to happen; give a
// server that requires client certificates a CAFile; give a client that
// verifies servers a CAFile (without one the system roots are used). A reload that fails (missing file, key not matching
// the certificate, unparsable PEM) is logged and the previous material keeps
// serving.
package tlsfiles
