package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/ticket"
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

// FuzzCodec_opRequests feeds arbitrary bytes through the gRPC codec as a
// ReleaseRequest, RenewRequest and SettleRequest: the codec never fails,
// and what it lets through is at most MaxOpRequestBytes with a token of at
// most ticket.MaxBytes.
func FuzzCodec_opRequests(f *testing.F) {
	f.Add([]byte{})
	f.Add(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("token")))
	f.Add(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 7))
	f.Add([]byte{0x0a, 0xff, 0xff, 0x7f})
	c := newCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, ren, set := &weirv1.ReleaseRequest{}, &weirv1.RenewRequest{}, &weirv1.SettleRequest{}
		checkOpDecode(t, c, data, set, set.GetReservation)
		checkOpDecode(t, c, data, rel, rel.GetPermit)
		checkOpDecode(t, c, data, ren, ren.GetPermit)
	})
}

func checkOpDecode(t *testing.T, c *grpclimit.Codec, data []byte, m proto.Message, token func() []byte) {
	t.Helper()
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m); err != nil {
		t.Fatalf("codec failed: %v", err)
	}
	if grpclimit.Refusal(m) != nil {
		return
	}
	if len(data) > MaxOpRequestBytes || len(token()) > ticket.MaxBytes {
		t.Fatalf("codec let through %d bytes, a token of %d", len(data), len(token()))
	}
}

// FuzzHTTP_ops posts arbitrary bodies to /v1/release, /v1/renew and
// /v1/settle of a real limiter: the answer is a 200 or a client error
// naming its problem, never a server error (no token names group "down").
func FuzzHTTP_ops(f *testing.F) {
	f.Add("/v1/release", `{"permit":"AQEJAAAAAAAAAAAAAAAAAAAABGFjbWUBF3dlaXI6e2FjbWV9OmpvYnM6YWNtZTp4"}`)
	f.Add("/v1/renew", `{"permit":"AQE=","ttl":"1s"}`)
	f.Add("/v1/settle", `{"reservation":"","actual":"-5"}`)
	f.Add("/v1/settle", `{`)
	h := NewHTTPHandler(DefaultHTTPConfig(), newOpsLimiter(f), nil, nil, nil)
	f.Fuzz(func(t *testing.T, path, body string) {
		switch path {
		case "/v1/release", "/v1/renew", "/v1/settle":
		default:
			return
		}
		if strings.Contains(body, "down") || strings.Contains(body, "ZG93b") {
			return // the store's unreachable group
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if jsonError(rec.Body.String()) == "" {
				t.Fatalf("%d without an error message: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("%s %q answered %d: %s", path, body, rec.Code, rec.Body.String())
		}
	})
}
