package main

import (
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestParseConfig_grpcStreamWorkers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want int
	}{
		{nil, nil, min(8*runtime.GOMAXPROCS(0), 1024)},
		{[]string{"--grpc-stream-workers", "0"}, nil, 0},
		{nil, []string{"WEIR_GRPC_STREAM_WORKERS", "16"}, 16},
		{[]string{"--grpc-stream-workers", "3"}, []string{"WEIR_GRPC_STREAM_WORKERS", "16"}, 3},
		{[]string{"--grpc-stream-workers", "1024"}, nil, 1024},
	} {
		cfg, err := parseConfig(tc.args, envMap(tc.env...), io.Discard)
		if err != nil || cfg.GRPCStreamWorkers != tc.want {
			t.Errorf("%v %v: %d workers, %v; want %d", tc.args, tc.env, cfg.GRPCStreamWorkers, err, tc.want)
		}
		if n := len(streamWorkerOptions(tc.want)); n != min(tc.want, 1) {
			t.Errorf("%d workers: %d server options", tc.want, n)
		}
	}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--grpc-stream-workers", "-1"}, nil, "--grpc-stream-workers -1 must be between 0 (off) and 1024"},
		{[]string{"--grpc-stream-workers", "1025"}, nil, "--grpc-stream-workers 1025 must be between 0 (off) and 1024"},
		{[]string{"--grpc-stream-workers", "many"}, nil, "invalid value"},
		{nil, []string{"WEIR_GRPC_STREAM_WORKERS", "many"}, `WEIR_GRPC_STREAM_WORKERS="many"`},
	} {
		_, err := parseConfig(tc.args, envMap(tc.env...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err = %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}
