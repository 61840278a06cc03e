package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
)

// FuzzCodec_DecideRequest feeds arbitrary bytes through the gRPC codec and
// the request conversion, as a Decide call would: the codec never fails
// (refusals are recorded for the service), and whatever it lets through is
// within the API's limits and converts without loss.
func FuzzCodec_DecideRequest(f *testing.F) {
	f.Add([]byte{})
	f.Add(descriptor("tenant", "acme"))
	f.Add(append(descriptor("tenant", "acme"), 0x10, 0x05))
	f.Add(descriptor("tenant", "\xff"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	c := newCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &weirv1.DecideRequest{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m); err != nil {
			t.Fatalf("codec failed: %v", err)
		}
		if grpclimit.Refusal(m) != nil {
			return
		}
		if len(data) > MaxDecideRequestBytes || len(m.GetDescriptors()) > limiter.MaxDescriptors {
			t.Fatalf("codec let through %d bytes, %d descriptors", len(data), len(m.GetDescriptors()))
		}
		r := FromProto(m)
		if len(r.Descriptors) != len(m.GetDescriptors()) {
			t.Fatalf("FromProto(%v) = %+v", m, r)
		}
		if err := checkRequest(m); err == nil {
			if _, err := proto.Marshal(m); err != nil {
				t.Fatalf("accepted request does not encode: %v", err)
			}
		}
	})
}

// FuzzHTTP_decide posts arbitrary bodies to /v1/decide: the answer is
// always a decision or a client error, never a server error, and a body
// that is not a decision names its problem.
func FuzzHTTP_decide(f *testing.F) {
	f.Add(`{"descriptors":{"tenant":"acme","user":"u1"},"cost":2}`)
	f.Add(`{"descriptors":{"tenant":"\udc00"}}`)
	f.Add(`{"descriptors":{"a":"\ud83d\ude00"}}`)
	f.Add(`{"cost":-1}`)
	f.Add(`{`)
	f.Add(`[]`)
	h := NewHTTPHandler(DefaultHTTPConfig(), &fakeDecider{}, nil, nil, nil)
	f.Fuzz(func(t *testing.T, body string) {
		var in weirv1.DecideRequest
		if unmarshalJSON.Unmarshal([]byte(body), &in) == nil {
			if _, hook := in.GetDescriptors()["fail"]; hook {
				return // the fake decider's hooks for server errors and hangs
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(body)))
		switch rec.Code {
		case http.StatusOK, http.StatusTooManyRequests:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if jsonError(rec.Body.String()) == "" {
				t.Fatalf("%d without an error message: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("body %q answered %d: %s", body, rec.Code, rec.Body.String())
		}
	})
}
