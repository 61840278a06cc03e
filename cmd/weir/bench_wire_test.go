package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// TestWireBatch_encode: the hand-encoded request reads back, through
// protobuf-go, as the request the message-based load sends (newBatch with
// its keys set), whichever descriptor takes the keys.
func TestWireBatch_encode(t *testing.T) {
	for _, keyDesc := range []string{"user", "tenant", "zone"} {
		cfg := benchConfig{batch: 3, keyDesc: keyDesc, cost: 300, desc: map[string]string{"tenant": "acme", "user": "u1", "route": "/é"}}
		keys := []string{"key-0", "", fmt.Sprintf("key-%0200d", 7)} // an empty key, a two-byte length
		w := newWireBatch(nil, cfg)
		for range 2 { // a second request reuses the buffer
			w.encode(keys)
		}
		var got weirv1.DecideBatchRequest
		if err := proto.Unmarshal(w.req.b, &got); err != nil {
			t.Fatalf("%s: %v", keyDesc, err)
		}
		want := (&bench{cfg: cfg}).newBatch()
		for i, r := range want.Requests {
			r.Descriptors[keyDesc] = keys[i]
		}
		if !proto.Equal(&got, want) {
			t.Errorf("%s: encoded %v, want %v", keyDesc, &got, want)
		}
	}
}

// TestWireAnswer_read counts what protobuf-go would read: one response per
// entry, allowed as its last allowed field says, other fields (limits,
// durations, unknown fields, the ring epoch) skipped.
func TestWireAnswer_read(t *testing.T) {
	full := &weirv1.DecideResponse{
		Allowed: true, RetryAfter: durationpb.New(time.Second), Remaining: -5, Matched: true,
		Limits:        []*weirv1.LimitStatus{{Name: "per-user", Key: "weir:{a}:u", Allowed: true, Window: durationpb.New(time.Minute)}},
		Fallback:      &weirv1.Fallback{Mode: "open"},
		PolicyVersion: "v1", RingEpoch: 9,
	}
	resp := &weirv1.DecideBatchResponse{RingEpoch: 3, Responses: []*weirv1.DecideResponse{
		full, {}, {Allowed: true}, {TooCostly: true, Limits: []*weirv1.LimitStatus{{Allowed: true}}}, full,
	}}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, 0xa8, 0x1f, 0x01)                   // unknown field 501, varint 1
	b = append(b, 0x0a, 0x04, 0x08, 0x01, 0x08, 0x00) // a response whose allowed is 1 then 0
	b = append(b, 0x0a, 0x04, 0x0a, 0x00, 0x18, 0x02) // allowed as bytes (unknown), remaining 2
	var a wireAnswer
	if err := a.read(b); err != nil {
		t.Fatal(err)
	}
	var back weirv1.DecideBatchResponse
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var allowed int64
	for _, r := range back.Responses {
		if r.Allowed {
			allowed++
		}
	}
	if a.responses != int64(len(back.Responses)) || a.allowed != allowed || a.allowed != 3 {
		t.Errorf("read %+v; protobuf-go reads %d responses, %d allowed (want 3)", a, len(back.Responses), allowed)
	}
}

// TestWireAnswer_read_malformed: truncated or broken data is an error,
// where protobuf-go fails too.
func TestWireAnswer_read_malformed(t *testing.T) {
	good, err := proto.Marshal(&weirv1.DecideBatchResponse{Responses: []*weirv1.DecideResponse{{Allowed: true, PolicyVersion: "v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"truncated response": good[:len(good)-1],
		"truncated tag":      {0x80},
		"field number zero":  {0x00, 0x01},
		"broken response":    {0x0a, 0x02, 0x08, 0x80},
	} {
		var a wireAnswer
		if err := a.read(b); !errors.Is(err, errWireMalformed) {
			t.Errorf("%s: err = %v, want errWireMalformed", name, err)
		}
		if proto.Unmarshal(b, new(weirv1.DecideBatchResponse)) == nil {
			t.Errorf("%s: protobuf-go accepts it; the case is wrong", name)
		}
	}
}

// BenchmarkClient_batch is the load generator's protobuf work for one
// DecideBatch of 100 (the request encoded, the answer read), per decision:
// through protobuf-go, as the generated stub does, and by hand, as the
// batch load does. The answer is a node's: two limit statuses each.
func BenchmarkClient_batch(b *testing.B) {
	const size = 100
	cfg := benchConfig{batch: size, keyDesc: "tenant", cost: 1, desc: map[string]string{"user": "u1"}}
	keys := make([]string, size)
	resp := &weirv1.DecideBatchResponse{RingEpoch: 7}
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i*97)
		resp.Responses = append(resp.Responses, nodeResponse(keys[i], i%3 != 0))
	}
	answer, err := proto.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("protobuf", func(b *testing.B) {
		req := (&bench{cfg: cfg}).newBatch()
		b.ReportAllocs()
		for b.Loop() {
			for i, r := range req.Requests {
				r.Descriptors[cfg.keyDesc] = keys[i]
			}
			if _, err := proto.Marshal(req); err != nil {
				b.Fatal(err)
			}
			var got weirv1.DecideBatchResponse
			if err := proto.Unmarshal(answer, &got); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/decision")
	})
	b.Run("wire", func(b *testing.B) {
		w := newWireBatch(nil, cfg)
		b.ReportAllocs()
		for b.Loop() {
			w.encode(keys)
			var a wireAnswer
			if err := a.read(answer); err != nil || a.responses != size {
				b.Fatal(err, a)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/decision")
	})
}

// nodeResponse is a node's answer on the built-in policy's composite.
func nodeResponse(tenant string, allowed bool) *weirv1.DecideResponse {
	r := &weirv1.DecideResponse{Allowed: allowed, Remaining: 2, ResetAfter: durationpb.New(400 * time.Millisecond), Matched: true, PolicyVersion: "builtin.1"}
	for _, name := range []string{"per-user", "per-tenant"} {
		r.Limits = append(r.Limits, &weirv1.LimitStatus{
			Name: name, Key: "weir:{" + tenant + "}:" + name + ":" + tenant, Allowed: allowed, Remaining: 2, Burst: 3,
			Window: durationpb.New(600 * time.Millisecond), ResetAfter: durationpb.New(400 * time.Millisecond),
		})
	}
	if !allowed {
		r.RetryAfter = durationpb.New(200 * time.Millisecond)
	}
	return r
}
