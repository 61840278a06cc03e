package shadow

import (
	"encoding/json"
	"net/http"
	"time"
)

// Path is where nodes serve the shadow report.
const Path = "/admin/shadow"

// Handler serves r's report as JSON on GET, for the last `since` (a Go
// duration query parameter; absent: everything kept), naming node as its
// source. A bad since gets 400.
func (r *Recorder) Handler(node string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "shadow: GET only", http.StatusMethodNotAllowed)
			return
		}
		var since time.Duration
		if s := req.URL.Query().Get("since"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				http.Error(w, "shadow: since must be a non-negative Go duration such as 1h", http.StatusBadRequest)
				return
			}
			since = d
		}
		rep := r.Report(since)
		rep.Nodes = []string{node}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rep)
	})
}
