// Command hopecho measures what one node-to-node message round trip costs
// on this machine, over gRPC's bidirectional stream (as package peer sends
// batches) and over plain length-prefixed frames on TCP, with nothing
// decided: the floor under any hop, and what replacing gRPC on the hop
// could save.
//
//	go run ./bench/hopecho -rounds 3 -callers 1,4
//
// For each caller count and round it starts an echo server and a client
// as child processes, one transport after the other, lets the client's
// callers send back to back for -duration, and reports round trips per
// second and the CPU (user + system, both processes) per round trip, with
// the median over rounds. Messages are 120 bytes, about one forwarded
// decision. The callers of one client share one stream (gRPC) or one
// connection (frames), one sender at a time, and one reader goroutine
// hands each answer to its caller, as peer's stream client does.
// docs/benchmarks.md, "The hop without weir", has its figures.
package main
