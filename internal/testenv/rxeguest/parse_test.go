package rxeguest

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// Outputs captured from the guests (busybox 1.35, perftest 4.5, rdma-core 44).
const (
	sendBWOut = `---------------------------------------------------------------------------------------
                    Send BW Test
 Dual-port       : OFF		Device         : rxe0
 Mtu             : 1024[B]
 Data ex. method : rdma_cm
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x001c PSN 0x9de799
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:11
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      300              6.63               4.66   		   0.000075
---------------------------------------------------------------------------------------
real 5.05
user 2.60
sys 1.03
`
	cmtimeOut = `creating id
connecting
step              total ms     max ms     min us  us / conn
create id    :        0.61       0.17       9.00      61.00
connect      :      215.93     193.56  175278.00   21593.10
destroy      :        1.98       0.94      15.00     198.30
real 0.54
`
)

func TestParseTimeP(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want time.Duration
		err  error
	}{
		{"perftest", sendBWOut, 5050 * time.Millisecond, nil},
		{"last wins", "real 1.00\nuser 0\nreal 2.50\n", 2500 * time.Millisecond, nil},
		{"zero", "real 0.00\n", 0, nil},
		{"none", "rdma_client: start\n", 0, ErrNoResult},
		{"garbage", "real soon\nreal -1\nreal NaN\n", 0, ErrNoResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTimeP(tt.out)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("ParseTimeP = %v, %v; want %v, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParsePerftestBW(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    PerftestBW
		wantErr bool
	}{
		{"send bw", sendBWOut, PerftestBW{Bytes: 65536, Iterations: 300, PeakMBps: 6.63, AvgMBps: 4.66, MsgRateMpps: 0.000075}, false},
		{"no header", " 65536 300 6.63 4.66 0.000075\n", PerftestBW{}, true},
		{"header only", " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n", PerftestBW{}, true},
		{"bad number", " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n 65536 x 1 2 3\n", PerftestBW{}, true},
		{"short line", " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n 65536 300\n", PerftestBW{}, true},
		// The warning perftest prints when it cannot time its clock (seen
		// under TCG), between the header and the result.
		{"uncalibrated", " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
			"Correlation coefficient r^2: 0.714654 < 0.9\n 65536      200              0.00               0.00   \t\t   0.000000\n",
			PerftestBW{Bytes: 65536, Iterations: 200}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePerftestBW(tt.out)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParsePerftestBW = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseCmtime(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []CmtimeStep
		wantErr bool
	}{
		{"table", cmtimeOut, []CmtimeStep{
			{"create id", 610 * time.Microsecond, 170 * time.Microsecond, 9 * time.Microsecond, 61 * time.Microsecond},
			{"connect", 215930 * time.Microsecond, 193560 * time.Microsecond, 175278 * time.Microsecond, 21593100 * time.Nanosecond},
			{"destroy", 1980 * time.Microsecond, 940 * time.Microsecond, 15 * time.Microsecond, 198300 * time.Nanosecond},
		}, false},
		{"no table", "creating id\n", nil, true},
		{"bad number", "step total ms max ms min us us / conn\nconnect : 1 2 x 4\n", nil, true},
		{"negative", "step total ms max ms min us us / conn\nconnect : 1 2 -3 4\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCmtime(tt.out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseCmtime error %v, want error %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ParseCmtime = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				// Float milliseconds: allow a nanosecond of rounding.
				g, w := got[i], tt.want[i]
				near := func(a, b time.Duration) bool { return a-b <= 1 && b-a <= 1 }
				if g.Name != w.Name || !near(g.Total, w.Total) || !near(g.Max, w.Max) || !near(g.Min, w.Min) || !near(g.PerConn, w.PerConn) {
					t.Errorf("step %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func FuzzParseTimeP(f *testing.F) {
	for _, s := range []string{sendBWOut, "real 1.5\n", "real \n", "real 1e400\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		d, err := ParseTimeP(out)
		if err == nil && d < 0 {
			t.Errorf("negative duration %v", d)
		}
	})
}

func FuzzParsePerftestBW(f *testing.F) {
	for _, s := range []string{sendBWOut, "#bytes BW average\n1 2 3 4 5\n", "#bytes BW average\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		r, err := ParsePerftestBW(out)
		if err != nil && !reflect.ValueOf(r).IsZero() {
			t.Errorf("error %v with a non-zero result %+v", err, r)
		}
	})
}

func FuzzParseCmtime(f *testing.F) {
	for _, s := range []string{cmtimeOut, "step total ms\nx : 1 2 3 4\n", "step total ms\n:\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		steps, err := ParseCmtime(out)
		if err == nil && len(steps) == 0 {
			t.Error("no steps and no error")
		}
		for _, s := range steps {
			if s.Total < 0 || s.Max < 0 || s.Min < 0 || s.PerConn < 0 {
				t.Errorf("negative duration in %+v", s)
			}
		}
	})
}
