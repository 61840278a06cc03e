package limiter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDeniedLog_note_oncePerIntervalOnRequestStamps(t *testing.T) {
	var buf bytes.Buffer
	d := newDeniedLog(slog.New(slog.NewTextHandler(&buf, nil)), time.Second)
	const t0 = 1_700_000_000_000_000_000 // nanoseconds
	for _, at := range []int64{t0, t0 + 1, t0 + 999_999_999, t0 + 1_000_000_000, t0 + 1_000_000_001} {
		d.note(at, "k", "per-user", resultDenied)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "suppressed_since_last=0") || !strings.Contains(lines[1], "suppressed_since_last=2") {
		t.Fatalf("suppressed counts:\n%s", buf.String())
	}
	buf.Reset()
	newDeniedLog(slog.New(slog.NewTextHandler(&buf, nil)), 0).note(t0, "k", "per-user", resultDenied)
	if buf.Len() != 0 {
		t.Fatal("a zero interval still logged")
	}
}
