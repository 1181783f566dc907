// Package loop is a poll loop's logic in plain Go: which lanes and
// consumers a loop runs (its table), the loop's iterations (Run,
// PollOnce), the hand-off of a reload's new table (Rewire, Adopted,
// FreeRetired), stopping and draining (StopRx, RxDrained, Stop) and its
// counters.
//
// What touches packets is behind small interfaces, called once per burst
// and never per packet: a Burst (received packets and the verdicts the
// classifier writes), an Engine (a table's C state, which dispatches a
// classified burst into the lanes, runs the native consumers and receives
// the next burst in one cgo call) and the slots of the interrupt-thread
// gate and of the callback removers' quiescence. Package dispatch fills
// them with package pmd's C state; tests fill them with fakes, so that
// this package, which does not import pmd, runs under the race detector.
//
// Lanes (R) and native consumers' C state (N) are type parameters: the
// table hands the engine the lanes and natives it placed without this
// package knowing their types.
package loop
