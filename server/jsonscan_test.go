package server

import (
	"net/http"
	"strings"
	"testing"
)

func TestLoneSurrogate(t *testing.T) {
	for body, want := range map[string]string{
		`{"descriptors":{"a":"\udc00"}}`:       `\udc00 at byte 21`,
		`{"descriptors":{"a":"\ud800"}}`:       `\ud800 at byte 21`,
		`{"descriptors":{"a":"\uD800x"}}`:      `\uD800 at byte 21`,
		`{"descriptors":{"a":"\ud800\u0041"}}`: `\ud800`,
		`{"descriptors":{"a":"\ud83d\ude00"}}`: "",
		`{"descriptors":{"a":"\\udc00"}}`:      "", // an escaped backslash, then text
		`{"descriptors":{"a":"\"\udc00"}}`:     `\udc00`,
		`{"descriptors":{"a":"x"}} "\udc00"`:   `\udc00`,
		`{"descriptors":{"a":"\u00e9\u12"}}`:   "",
		`{"descriptors":{"a":"\ud800\ud800"}}`: `\ud800`,
	} {
		got := loneSurrogate([]byte(body))
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("loneSurrogate(%s) = %q, want %q", body, got, want)
		}
	}
}

// A lone surrogate gets a message that says what is wrong, not protojson's
// "unexpected EOF".
func TestHTTP_loneSurrogateMessage(t *testing.T) {
	srv := startHTTP(t, &fakeDecider{}, nil, nil)
	r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"tenant":"\udc00"}}`)
	if r.status != http.StatusBadRequest || !strings.Contains(jsonError(r.body), `unpaired UTF-16 surrogate escape \udc00`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
