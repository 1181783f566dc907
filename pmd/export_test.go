package pmd

import "time"

// ProbeGate exposes Gate.probe to the external tests.
func ProbeGate(g *Gate, timeout time.Duration) (bool, error) { return g.probe(timeout) }
