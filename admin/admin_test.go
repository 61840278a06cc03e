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

func TestTarget(t *testing.T) {
	q := map[string][]string{"key": {"a b"}}
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:8092", "http://127.0.0.1:8092/admin/inspect?key=a+b"},
		{"https://weir-0.weir:8092", "https://weir-0.weir:8092/admin/inspect?key=a+b"},
		{"https://[::1]:8092/", "https://[::1]:8092/admin/inspect?key=a+b"},
	} {
		if got, err := target(tc.addr, InspectPath, q); err != nil || got != tc.want {
			t.Errorf("target(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
	for _, bad := range []string{"ftp://h:1", "https://", "https://h:1/some/path", "https://h:1%zz"} {
		if got, err := target(bad, InspectPath, nil); err == nil {
			t.Errorf("target(%q) = %q, want an error", bad, got)
		}
	}
}
