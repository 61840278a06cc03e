package membership

import (
	"bytes"
	"context"
	"log/slog"
)

// logWriter receives memberlist's log lines, which look like
// "[WARN] memberlist: ...", and forwards them to slog at the matching level.
// memberlist writes through a *log.Logger, which calls Write once per line
// and serialises calls.
type logWriter struct {
	logger *slog.Logger
}

var levels = []struct {
	prefix []byte
	level  slog.Level
}{
	{[]byte("[DEBUG]"), slog.LevelDebug},
	{[]byte("[INFO]"), slog.LevelInfo},
	{[]byte("[WARN]"), slog.LevelWarn},
	{[]byte("[ERR]"), slog.LevelError},
	{[]byte("[ERROR]"), slog.LevelError},
}

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, l := range levels {
		if rest, ok := bytes.CutPrefix(line, l.prefix); ok {
			level, line = l.level, bytes.TrimSpace(rest)
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.logger.Log(context.Background(), level, string(line), "component", "memberlist")
	return len(p), nil
}
