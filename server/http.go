package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/httplimit"
	"github.com/weirhq/weir/inflight"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/ticket"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// HTTPConfig configures the HTTP API.
type HTTPConfig struct {
	// MaxBodyBytes caps a request body on /v1/decide, /v1/decide_batch,
	// /v1/release, /v1/renew and /v1/settle (on the last three never below
	// MaxOpBodyBytes, so that any token the node issues can come back);
	// a larger body is refused with 413 before it is parsed. Zero means
	// DefaultMaxBodyBytes. Raising it lets bigger batches through at the
	// price of more memory per request.
	MaxBodyBytes int64
	// InFlight, if not nil, is the node-wide budget of bytes being
	// received: a body reserves its Content-Length (MaxBodyBytes when
	// unknown) before it is read, until it is parsed. A body that finds no
	// room in time is answered 503 with Retry-After: 1, unread.
	InFlight *inflight.Budget
}

// DefaultMaxBodyBytes is the body cap when HTTPConfig.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 64 << 10

// MaxOpBodyBytes is the least body cap of /v1/release, /v1/renew and
// /v1/settle: the largest token (ticket.MaxBytes) in base64, as JSON
// carries it, and room for the request's other fields.
const MaxOpBodyBytes = (ticket.MaxBytes+2)/3*4 + 512

// DefaultHTTPConfig returns the default HTTP API configuration.
func DefaultHTTPConfig() HTTPConfig {
	return HTTPConfig{MaxBodyBytes: DefaultMaxBodyBytes}
}

// Validate reports whether c is usable. It changes nothing.
func (c HTTPConfig) Validate() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("server: max body bytes %d is negative", c.MaxBodyBytes)
	}
	return nil
}

// NewHTTPHandler serves the node's HTTP API:
//
//	POST /v1/decide        a DecideRequest as protojson; answers the
//	                       DecideResponse with the status of
//	                       httplimit.StatusCode (200 or 429) and the fields
//	                       of httplimit.WriteHeaders
//	POST /v1/decide_batch  a DecideBatchRequest; always 200, no per-response
//	                       fields
//	POST /v1/release       a ReleaseRequest (the permit base64, as protojson
//	                       writes bytes); 200 with the ReleaseResponse
//	POST /v1/renew         a RenewRequest; 200 with the RenewResponse
//	POST /v1/settle        a SettleRequest; 200 with the SettleResponse
//	GET  /metrics          reg in the Prometheus text format (404 if reg is
//	                       nil)
//	GET  /healthz          200 "ok" while the process runs
//	GET  /readyz           200 when ready() returns nil (or ready is nil),
//	                       503 with the reason otherwise
//
// JSON answers use the proto field names and carry every field, zero values
// included ("allowed": false, "remaining": "0", "retry_after": "0s",
// "fallback": null when the decision was made normally, "permit": ""), so
// a client never has to tell an absent field from a zero one. A denial by
// a concurrency limit is 429 with Retry-After as any denial. On the
// decide, release, renew and settle endpoints a bad request (malformed JSON, unknown fields, a cost
// below 1 — an absent cost is 1 —, anything limiter.ErrInvalidRequest
// wraps, a malformed or wrong-kind token) is 400, another method 405, a
// body over the cap 413, an expired deadline 504, release, renew and settle
// on a Decider that is not an Operator 501, and any other failure (the
// token's owner unreachable) 503; errors come as {"error": "..."}. cfg must pass Validate; a
// nil logger discards. The handler is safe for concurrent use.
func NewHTTPHandler(cfg HTTPConfig, d Decider, reg prometheus.Gatherer, ready func() error, logger *slog.Logger) http.Handler {
	if d == nil {
		panic("server: NewHTTPHandler needs a Decider")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	a := &httpAPI{cfg: cfg, d: d, log: orDiscard(logger)}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/decide", a.decide)
	mux.HandleFunc("/v1/decide_batch", a.decideBatch)
	mux.HandleFunc("/v1/release", a.release)
	mux.HandleFunc("/v1/renew", a.renew)
	mux.HandleFunc("/v1/settle", a.settle)
	if reg != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
				return
			}
		}
		writeText(w, http.StatusOK, "ready")
	})
	return mux
}

type httpAPI struct {
	cfg HTTPConfig
	d   Decider
	log *slog.Logger
}

var (
	unmarshalJSON = protojson.UnmarshalOptions{DiscardUnknown: false}
	marshalJSON   = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
)

func (a *httpAPI) decide(w http.ResponseWriter, r *http.Request) {
	in := &weirv1.DecideRequest{}
	if !a.readBody(w, r, in, a.cfg.MaxBodyBytes) {
		return
	}
	out, err := decide(r.Context(), a.d, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	httplimit.WriteHeaders(w.Header(), out)
	zeroDurations(out)
	a.writeProto(w, httplimit.StatusCode(out), out)
}

func (a *httpAPI) decideBatch(w http.ResponseWriter, r *http.Request) {
	in := &weirv1.DecideBatchRequest{}
	if !a.readBody(w, r, in, a.cfg.MaxBodyBytes) {
		return
	}
	out, err := decideBatch(r.Context(), a.d, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	for _, resp := range out.GetResponses() {
		zeroDurations(resp)
	}
	a.writeProto(w, http.StatusOK, out)
}

// bodyReservation is what a body of the declared length (-1: unknown) may
// hold while it is read and parsed, under a cap of maxBody.
func bodyReservation(declared, maxBody int64) int64 {
	if declared < 0 || declared > maxBody {
		return maxBody
	}
	return max(declared, 1)
}

// readBody checks the method and parses the body, capped at maxBody, into
// m. When it returns false it has already answered.
func (a *httpAPI) readBody(w http.ResponseWriter, r *http.Request, m proto.Message, maxBody int64) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSONError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed, use POST")
		return false
	}
	if a.cfg.InFlight != nil {
		release, err := a.cfg.InFlight.Acquire(r.Context(), r.RemoteAddr, bodyReservation(r.ContentLength, maxBody))
		if err != nil {
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusServiceUnavailable, "body not read: "+err.Error())
			return false
		}
		defer release()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSONError(w, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("body exceeds %d bytes", tooBig.Limit))
			return false
		}
		writeJSONError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return false
	}
	if err := unmarshalJSON.Unmarshal(body, m); err != nil {
		msg := err.Error()
		if lone := loneSurrogate(body); lone != "" {
			msg = lone
		}
		writeJSONError(w, http.StatusBadRequest, "parsing body: "+msg)
		return false
	}
	return true
}

// writeError maps a decision error to an HTTP status (see NewHTTPHandler).
func (a *httpAPI) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, limiter.ErrInvalidRequest):
		code = http.StatusBadRequest
	case errors.Is(err, errNoOperator):
		code = http.StatusNotImplemented
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		// The caller has gone; nobody reads this answer.
	case errors.Is(err, errBrokenDecider):
		code = http.StatusInternalServerError
		a.log.Error("decision failed", "path", r.URL.Path, "err", err)
	default:
		a.log.Warn("decision failed", "path", r.URL.Path, "err", err)
	}
	writeJSONError(w, code, err.Error())
}

func (a *httpAPI) writeProto(w http.ResponseWriter, code int, m proto.Message) {
	body, err := marshalJSON.Marshal(m)
	if err != nil { // only for invalid UTF-8 in strings the limiter produced
		a.log.Error("encoding response", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "encoding response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(body)
}

// zeroDurations sets r's unset durations to zero, so that JSON shows them
// as "0s" rather than null (ToProto leaves a zero duration unset, which
// costs nothing on the gRPC wire).
func zeroDurations(r *weirv1.DecideResponse) {
	for _, d := range []**durationpb.Duration{&r.RetryAfter, &r.ResetAfter} {
		if *d == nil {
			*d = &durationpb.Duration{}
		}
	}
	for _, l := range r.GetLimits() {
		for _, d := range []**durationpb.Duration{&l.RetryAfter, &l.Window, &l.ResetAfter} {
			if *d == nil {
				*d = &durationpb.Duration{}
			}
		}
	}
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg}) // a struct of one string always encodes
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}
