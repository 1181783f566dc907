// Package dispatch classifies received frames and hands each to the
// service that claims it, in poll loops that run on dedicated lcores.
//
// Classification itself is package classify (pure Go, no cgo).
//
// # Lanes
//
// Every poll loop that receives feeds each service through a ring of its
// own: the service's lane for that loop (Service.Rings[lane]). A lane has
// exactly one producer, the loop, and one consumer, so it uses DPDK's
// single-producer, single-consumer ring paths. A service's consumer runs
// in one of two ways:
//
//   - Local (Service.Local, one consumer per lane): the loop that received
//     the packet also consumes it, inside the same cgo call that
//     dispatched it. Sinks and forwarders run this way unless the
//     configuration names a loop for them; a forwarder then transmits on
//     a TX queue of its loop's own.
//   - Owned (Service.Consumer, or a task such as the kernel exception
//     path): one consumer, on the loop that owns the service, drains all
//     its lanes through a RingSet, which takes them in turn. The RoCE
//     endpoint and the kernel interface are single objects and run this
//     way.
//
// Why: with one ring per service fed by every loop, each enqueue is a
// compare-and-swap on ring heads that every receiving core writes, and
// every packet is touched by a second core (its consumer's), which pulls
// the mbuf's cache lines across and frees it into another core's mempool
// cache. Measured (bench/scale.sh; issue 11's 16-core table), two loops
// bought 1.34× one loop where testpmd doubles, and cephdpdkd stayed at
// about 0.4× testpmd io from 2 to 14 cores. With local consumers a
// packet stays on the core that received it from RX to TX, as in
// testpmd, and the loops share nothing on the packet path: the shared
// state left is the services' counters, added to once per 64 iterations.
// Owned consumers still cross cores, but only for the services that need
// one consumer (RoCE, kernel), and without contended ring heads. A local
// native consumer whose lane is empty takes its packets straight from the
// dispatcher, without the ring's enqueue and dequeue: at one loop that
// alone measured about 8% more packets per CPU-second (net_pcap replay,
// AMD EPYC), 11% with the loop's other trimming.
//
// Order within a flow is kept: RSS puts a flow on one RX queue, one loop
// owns the queue, its lane is FIFO, and a ring set never reorders within
// a lane. A full lane drops the rest of the burst, freed and counted in
// the service's Stats.Drops.
//
// # The loop
//
// A Poller is one poll loop. Per RX queue and iteration it classifies the
// burst it received last time, in Go, then makes one cgo call that
// enqueues the burst into its lanes (one enqueue per service present),
// runs the consumers implemented in C (NativeConsumer: counting sink,
// forwarder) and receives the next burst. Consumers written in Go (the
// RoCE endpoint) implement Consumer and are polled after. Counters are
// kept in plain fields and published to atomics when the loop is idle or
// every 64 iterations. The burst's first segments reach Go as a [][]byte
// whose slice headers C fills in, classified with one call a burst.
//
// Where a packet's time goes, at one loop replaying the sample capture
// through net_pcap (AMD EPYC, bench/scale.sh 1): the driver's RX copy and
// TX free about 26 ns, as in testpmd; classification about 6.5 ns; the
// rest of the loop (cgo call, burst fill, dispatch, counters) about 6 ns.
// Without classification the loop forwarded 31.5 Mpps where testpmd's
// 5tswap forwards 28.4: its whole per-packet work costs about what
// classification alone costs here. Neither the port tables' cache misses
// nor branch misses are that cost: with the port lookups replaced by a
// constant the loop ran within 3% of its rate, and on frames copied in as
// net_pcap copies them (classify's BenchmarkClassifyCopied, which predicts
// the loop's figure: 6.7 ns a frame) the capture sorted by kind of frame
// classified no faster. It is mostly the classifier's own work, about 90
// instructions for an IPv4 TCP frame: 6.0 ns a frame on the capture's
// frames already in cache, and on one such frame repeated. Trimming does
// not reach far enough: a second fast path for untagged IPv4 TCP and UDP
// (IHL 5 only, one folded table from ports to service) took 4.2 ns on a
// hot frame, but it fits about two thirds of the sample's frames and saved
// 0.5 ns a frame on the copied capture (less than the hot figure predicts,
// 1.2 ns, which this VM, without PMU counters, cannot explain), within the
// loop's noise (0 to +1.6% in five alternating runs), and was not kept.
// Halving the cost needs a classifier of another kind.
//
// The loop's logic (which lanes and consumers a loop runs, its
// iterations, a reload's hand-off, stopping, draining, counters) is
// package loop's, plain Go over small interfaces that tests fake. This
// package fills them with package pmd's C state (pmd.Loop, pmd.Burst,
// pmd.Native, the gate's and quiescence's slots), and Ring and RingSet
// are pmd's types under this package's names.
package dispatch
