package rxeguest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Parsers for what the guests' tools print, so that tests can turn their
// output into figures.

// ErrNoResult reports that a tool's output holds no result to parse.
var ErrNoResult = errors.New("no result in output")

// ParseTimeP returns the elapsed time busybox `time -p` printed ("real
// 1.23"); when there are several, the last one.
func ParseTimeP(out string) (time.Duration, error) {
	var (
		d     time.Duration
		found bool
	)
	for _, line := range strings.Split(out, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "real ")
		if !ok {
			continue
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(s >= 0 && s <= 1e6) { // also rejects NaN
			continue
		}
		d, found = time.Duration(s*float64(time.Second)), true
	}
	if !found {
		return 0, fmt.Errorf("rxeguest: time -p: %w", ErrNoResult)
	}
	return d, nil
}

// PerftestBW is the result line of a perftest bandwidth tool (ib_send_bw,
// ib_write_bw, ib_read_bw).
type PerftestBW struct {
	Bytes       int     // message size
	Iterations  int     // messages
	PeakMBps    float64 // "BW peak[MB/sec]"
	AvgMBps     float64 // "BW average[MB/sec]"
	MsgRateMpps float64 // "MsgRate[Mpps]"
}

// PerftestUncalibrated reports whether perftest said it could not
// measure its clock's rate (a regression of its timing samples with r² <
// 0.9, common under TCG on a busy host): it then reports 0 MB/s, as it
// cannot turn cycles into time.
func PerftestUncalibrated(out string) bool {
	return strings.Contains(out, perftestUncalibrated)
}

// perftestUncalibrated starts the warning perftest prints then.
const perftestUncalibrated = "Correlation coefficient r^2"

// ParsePerftestBW returns the first result line under perftest's
// "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"
// header.
func ParsePerftestBW(out string) (PerftestBW, error) {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if !strings.Contains(line, "#bytes") || !strings.Contains(line, "BW average") {
			continue
		}
		for _, l := range lines[i+1:] {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			if len(f) < 5 {
				break
			}
			if PerftestUncalibrated(l) {
				// The warning comes before the result line.
				continue
			}
			var r PerftestBW
			var errs [5]error
			r.Bytes, errs[0] = strconv.Atoi(f[0])
			r.Iterations, errs[1] = strconv.Atoi(f[1])
			r.PeakMBps, errs[2] = strconv.ParseFloat(f[2], 64)
			r.AvgMBps, errs[3] = strconv.ParseFloat(f[3], 64)
			r.MsgRateMpps, errs[4] = strconv.ParseFloat(f[4], 64)
			if err := errors.Join(errs[:]...); err != nil {
				return PerftestBW{}, fmt.Errorf("rxeguest: perftest result %q: %w", strings.TrimSpace(l), err)
			}
			return r, nil
		}
	}
	return PerftestBW{}, fmt.Errorf("rxeguest: perftest: %w", ErrNoResult)
}

// CmtimeStep is one row of the table rdma-core's cmtime prints: how long
// a step of connection setup or teardown took over all connections.
type CmtimeStep struct {
	Name    string        // "create id", "resolve addr", ..., "connect", "disconnect", "destroy"
	Total   time.Duration // all connections, from the first start to the last end
	Max     time.Duration // slowest connection
	Min     time.Duration // fastest connection
	PerConn time.Duration // Total divided by the number of connections
}

// ParseCmtime returns the rows of cmtime's table
//
//	step              total ms     max ms     min us  us / conn
//	connect      :      215.93     193.56  175278.00   21593.10
func ParseCmtime(out string) ([]CmtimeStep, error) {
	var steps []CmtimeStep
	in := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "step") && strings.Contains(line, "total ms") {
			in = true
			continue
		}
		if !in {
			continue
		}
		name, vals, ok := strings.Cut(line, ":")
		if !ok {
			break
		}
		f := strings.Fields(vals)
		if len(f) != 4 {
			break
		}
		var v [4]float64
		for i, s := range f {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil || !(x >= 0 && x <= 1e12) { // also rejects NaN
				return nil, fmt.Errorf("rxeguest: cmtime row %q: bad number %q", strings.TrimSpace(line), s)
			}
			v[i] = x
		}
		steps = append(steps, CmtimeStep{
			Name:    strings.TrimSpace(name),
			Total:   time.Duration(v[0] * float64(time.Millisecond)),
			Max:     time.Duration(v[1] * float64(time.Millisecond)),
			Min:     time.Duration(v[2] * float64(time.Microsecond)),
			PerConn: time.Duration(v[3] * float64(time.Microsecond)),
		})
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("rxeguest: cmtime: %w", ErrNoResult)
	}
	return steps, nil
}
