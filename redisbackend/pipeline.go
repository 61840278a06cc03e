package redisbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// DecidePipelined runs many independent composite decisions in one pipeline,
// one round trip per Redis node involved (on Cluster go-redis splits the
// pipeline by slot). Each request means what Decide's arguments mean and is
// atomic on its own; requests are not atomic with one another.
//
// decisions and errs have one entry per request; read decisions[i] only when
// errs[i] is nil. A request that fails validation (including [ErrCrossSlot])
// gets its error without being sent, and the others still run. The last
// result, err, is non-nil when the round trip itself failed (a timeout, a
// dead connection); the requests it hit carry that error too, and any that
// succeeded (possible on Cluster, where another node may have answered) are
// still reported, because their decisions were applied.
func (b *Backend) DecidePipelined(ctx context.Context, reqs []DecideRequest) ([]Decision, []error, error) {
	decisions := make([]Decision, len(reqs))
	errs := make([]error, len(reqs))
	args := make([][]any, len(reqs))
	var send []int
	for i, r := range reqs {
		a, err := scriptArgs(r.Keys, r.Limits, r.Cost, r.Now)
		if err != nil {
			errs[i] = err
			continue
		}
		args[i] = a
		send = append(send, i)
	}
	if len(send) == 0 {
		return decisions, errs, nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()

	cmds, err := b.runPipeline(ctx, reqs, args, send, false)
	var retry []int
	for j, i := range send {
		if isNoScript(cmds[j].Err()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		// The node lost its script cache (restart, SCRIPT FLUSH). Those
		// requests did not run, so resending them with EVAL is safe; EVAL
		// also caches the script for the next EVALSHA.
		retryCmds, rerr := b.runPipeline(ctx, reqs, args, retry, true)
		for j, i := range retry {
			cmds[indexOf(send, i)] = retryCmds[j]
		}
		err = rerr
	}
	b.noteError(err)
	var transport error
	for j, i := range send {
		d, derr := replyDecision(cmds[j], len(reqs[i].Keys))
		if derr != nil {
			errs[i] = fmt.Errorf("redisbackend: pipelined decide %q: %w", reqs[i].Keys[0], derr)
			if !isRedisError(cmds[j].Err()) && transport == nil {
				transport = errs[i]
			}
			continue
		}
		decisions[i] = d
	}
	if transport == nil && err != nil && !isRedisError(err) {
		transport = fmt.Errorf("redisbackend: pipeline: %w", err)
	}
	return decisions, errs, transport
}

// runPipeline queues the requests at idx (EVALSHA, or EVAL when full) and
// executes them. The returned commands are in the order of idx.
func (b *Backend) runPipeline(ctx context.Context, reqs []DecideRequest, args [][]any, idx []int, full bool) ([]*redis.Cmd, error) {
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(idx))
	for j, i := range idx {
		cmds[j] = queueScript(ctx, pipe, b.script, full, reqs[i].Keys, args[i]...)
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

// queueScript queues one call of s: EVALSHA, or EVAL (which also caches
// the script again) when full, for a server that answered NOSCRIPT.
func queueScript(ctx context.Context, pipe redis.Pipeliner, s *redis.Script, full bool, keys []string, args ...any) *redis.Cmd {
	if full {
		return s.Eval(ctx, pipe, keys, args...)
	}
	return s.EvalSha(ctx, pipe, keys, args...)
}

func replyDecision(cmd *redis.Cmd, n int) (Decision, error) {
	r, err := cmd.Int64Slice()
	if err != nil {
		return Decision{}, err
	}
	return parseReply(r, n)
}

func indexOf(xs []int, x int) int {
	for j, v := range xs {
		if v == x {
			return j
		}
	}
	return -1
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// isRedisError reports whether err is a reply from the server (the command
// ran and failed, or was refused) rather than a transport or context error.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}
