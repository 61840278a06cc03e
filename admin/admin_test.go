package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAsk_ordersAnswersAndReportsFailures(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != StatusPath || r.URL.Query().Get("x") != "1" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"node":"n1","policy_version":"v"}`))
	}))
	t.Cleanup(ok.Close)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "nope", http.StatusBadRequest)
	}))
	t.Cleanup(bad.Close)
	addrs := []string{strings.TrimPrefix(bad.URL, "http://"), strings.TrimPrefix(ok.URL, "http://"), "127.0.0.1:1"}
	calls := 0
	got := Ask[Status](t.Context(), http.DefaultClient, addrs, StatusPath, map[string][]string{"x": {"1"}}, func(done, total int) {
		calls++
		if total != 3 || done != calls {
			t.Errorf("progress(%d, %d) on call %d", done, total, calls)
		}
	})
	if calls != 3 || len(got) != 3 {
		t.Fatalf("calls %d, answers %d", calls, len(got))
	}
	if got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "nope") {
		t.Errorf("a 400 answer: %v", got[0].Err)
	}
	if got[1].Err != nil || got[1].Value.Node != "n1" || got[1].Addr != addrs[1] {
		t.Errorf("the good node: %+v", got[1])
	}
	if got[2].Err == nil {
		t.Error("an unreachable node gave no error")
	}
}
