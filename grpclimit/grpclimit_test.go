package grpclimit

import (
	"strings"
	"testing"
	"time"
)

func ok() Limits {
	return Limits{MaxRecvMsgBytes: 100, MaxConcurrentStreams: 1, KeepaliveMinTime: time.Second,
		KeepaliveTime: time.Second, KeepaliveTimeout: time.Second, MaxConnectionIdle: time.Second}
}

func TestLimits_Validate(t *testing.T) {
	if err := ok().Validate(100); err != nil {
		t.Fatalf("valid limits: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(*Limits)
		want   string
	}{
		"message below the largest request": {func(l *Limits) { l.MaxRecvMsgBytes = 99 }, "below the largest valid request, 100"},
		"no streams":                        {func(l *Limits) { l.MaxConcurrentStreams = 0 }, "max concurrent streams must be positive"},
		"zero keepalive min time":           {func(l *Limits) { l.KeepaliveMinTime = 0 }, "keepalive min time 0s must be positive"},
		"negative keepalive timeout":        {func(l *Limits) { l.KeepaliveTimeout = -time.Second }, "keepalive timeout -1s must be positive"},
		"zero max connection idle":          {func(l *Limits) { l.MaxConnectionIdle = 0 }, "max connection idle 0s must be positive"},
	} {
		l := ok()
		tc.mutate(&l)
		if err := l.Validate(100); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func TestLimits_ServerOptions_oneEachBound(t *testing.T) {
	if n := len(ok().ServerOptions(NewCodec(func(any) Check { return nil }))); n != 7 {
		t.Fatalf("%d options, want 7 (codec, two windows, message size, streams, keepalive policy and parameters)", n)
	}
}

func TestDefaultLimits(t *testing.T) {
	l := DefaultLimits(100, 8)
	if l.MaxRecvMsgBytes != 100 || l.MaxConcurrentStreams != 8 {
		t.Fatalf("DefaultLimits(100, 8) = %+v", l)
	}
	if err := l.Validate(100); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}
