// Package dnstest is a DNS server for tests: it answers A queries for the
// names it is given, and can be made slow (every answer after a delay) or
// silent (queries are held unanswered until it speaks again), the ways a
// loaded or broken resolver misbehaves. It is test support: only _test.go
// files import it.
//
//	srv := dnstest.Start(t, "127.0.0.1:0")
//	srv.Set("redis.weir.test", netip.MustParseAddr("127.0.0.1"))
//	r := &net.Resolver{PreferGo: true, Dial: srv.Dial} // or name srv in a resolv.conf
//	srv.Hold()    // queries wait, unanswered...
//	srv.Release() // ...and are answered now
//
// Over UDP and TCP on one address (Dial asks over TCP, so that Close ends
// a held query at once); one question per query (what Go's and glibc's
// resolvers send). A name it was not given is NXDOMAIN; a given name's
// AAAA query is answered with no record.
package dnstest
