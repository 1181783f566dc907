// Package pcapcheck audits RoCEv2 traffic in a pcap or pcapng capture:
// it decodes every frame sent to UDP port 4791, verifies the ICRC and
// header consistency, follows PSNs per QP and direction, and reports
// every frame that a conforming peer would not have sent.
//
// Check reads a capture (Ethernet, Linux cooked (v1) or raw IP link
// types) and returns a Report; Report.WriteTo prints a human-readable
// summary and Report.Bad counts the bad frames. cephdpdkd's pcap-check
// command is a thin wrapper around them.
//
// What counts as bad:
//   - malformed frames: truncated, bad IPv4 checksum, bad pad count,
//     TVer ≠ 0, unknown opcode, bad ICRC, undecodable CM MADs;
//   - on RC and UC request streams, a PSN ahead of the next expected
//     one ("psn gap: expected X got Y"), an opcode out of message order,
//     and, once the path MTU is known (from the CM REQ, or learned from
//     the first FIRST/MIDDLE packet), a payload length the MTU forbids;
//   - on response streams (ACKs, READ responses), a gap inside one
//     multi-packet READ response.
//
// Retransmissions (a request PSN behind the expected one, a response
// PSN behind the highest seen) are counted, not reported as bad. ACK
// PSNs may skip forward, since responders coalesce ACKs. UD PSNs come
// from the sender's QP counter shared by all its destinations, so UD
// gaps are counted but not reported as bad. A READ REQUEST advances the
// expected request PSN by the number of response packets; with the MTU
// unknown, any advance a 256..4096-byte MTU allows is accepted.
package pcapcheck
