// Package netlab builds a small test network on one Linux machine and breaks
// it on demand, for the chaos suite.
//
// A Lab is one Linux bridge in the root network namespace plus one network
// namespace per Host. Each host is joined to the bridge by a veth pair (the
// namespace side is called eth0) and has its own IPv4 address on a private
// /24 that the lab picks so that it overlaps nothing already configured on
// the machine. The bridge itself holds the subnet's .1 address (ControlIP),
// so the orchestrator, which stays in the root namespace, can reach every
// host directly; hosts get .2, .3, and so on, and a default route via the
// bridge.
//
// Real processes run inside the hosts: Host.Command builds an exec.Cmd that
// runs through "ip netns exec", and Host.Start starts it, appends its output
// to a log file and records it so that Lab.Close kills it. Started processes
// get SIGKILL as their parent-death signal and run in their own process
// group; Proc.Signal signals the whole group, so SIGSTOP/SIGCONT pause and
// resume a process together with its children.
//
// Faults are nftables rules inside the hosts' namespaces: every host has a
// table "inet weirchaos" whose input chain drops every packet whose source
// address is in the host's "blocked" set. Block(from, to) adds from's address
// to to's set, so the fault is one-way and looks like a black hole: packets
// are dropped, not rejected, and established connections are cut as well
// because the rule has no conntrack exceptions. Partition blocks both ways
// across two groups of hosts, and Heal empties every set.
//
// Proc.Throttle limits a process to a quota of CPU time per period, the way
// a container's CPU limit does (cgroup v2 cpu.max, or the CFS quota files of
// a v1 cpu hierarchy, whichever the machine has): a slow process rather
// than a dead one. Each throttled process gets its own cgroup under
// "<cpu root>/weir-netlab/<id>/"; Unthrottle, Close and the sweep of a
// dead owner's lab move the processes back and remove them.
//
// # Names and cleanup
//
// Everything a lab creates is named after its id, "wch" + the owner's PID in
// base 36 + "-" + a per-process sequence number, e.g. "wch1ps3-0":
// the bridge is "<id>br", the root side of host N's veth pair is "<id>h<N>",
// and host "db1"'s namespace is "<id>-db1". Interface names stay within
// Linux's 15-byte limit. The lab also keeps a directory
// /run/weir-netlab/<id> holding an "owner" file that the owning process
// keeps locked (flock) for the lab's lifetime.
//
// New first sweeps stale labs: any namespace, link or state directory whose
// lab has no live owner is removed, after the processes still running
// inside its namespaces are killed. A lab is live while its owner file is
// locked (which also copes with recycled PIDs); when there is no owner file,
// while its owner PID runs. Labs of live processes are never touched, so
// several labs, in one process or several, can run at the same time. A run
// killed with SIGKILL therefore leaves garbage only until the next New on
// the machine. Orchestrators that share a root network namespace must also
// share /run and a PID namespace (the usual case on one machine): names
// carry PIDs.
//
// Close kills every recorded process (SIGCONT, then SIGKILL to its process
// group), then everything else still inside the lab's namespaces, and
// deletes the namespaces, the veth pairs, the bridge and the state
// directory. It is idempotent and also cleans up after a New or AddHost that
// failed half-way.
//
// # Requirements
//
// netlab needs Linux, root (CAP_NET_ADMIN and CAP_SYS_ADMIN), the "ip"
// command from iproute2 and the "nft" command from nftables. New returns an
// error wrapping ErrUnsupported when they are missing, so tests can skip.
// netlab changes no global sysctl. If br_netfilter is loaded
// (net.bridge.bridge-nf-call-iptables=1), traffic between hosts also
// crosses the root namespace's forward hook, so a firewall there that drops
// forwarded packets (as Docker's does) also drops the lab's traffic.
//
// Parent-death signals fire when the OS thread that started the process
// exits, not the whole orchestrator; do not call Host.Start from a goroutine
// that has locked its OS thread and then exits.
package netlab
