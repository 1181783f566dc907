package service_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cephdpdkd/cephdpdkd/service"
)

// helper is the service process the tests start: args are the daemon's
// file prefix, the service, then the role's own.
//
//	recv N FILE  receive N frames, write them length-prefixed to FILE
//	hold         receive a burst, print "holding N", keep it until killed
//	send N       send N frames (helperFrame), then detach
//	rate D       receive for D, print the packets per second
//	untilgone    receive until the daemon is gone (exit 0) or another error
func helper(role string, args []string) int {
	if err := runHelper(role, args); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func runHelper(role string, args []string) (err error) {
	if len(args) < 2 {
		return errors.New("want: prefix service ...")
	}
	start := time.Now()
	d, err := service.Join(service.JoinConfig{FilePrefix: args[0]})
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := d.Attach(args[1])
	if err != nil {
		return err
	}
	attach := time.Since(start)
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	switch role {
	case "recv":
		n, _ := strconv.Atoi(args[2])
		f, err := os.Create(args[3])
		if err != nil {
			return err
		}
		defer f.Close()
		got := 0
		for deadline := time.Now().Add(30 * time.Second); got < n; {
			k, err := s.Recv(min(s.Burst(), n-got))
			if err != nil && !errors.Is(err, service.ErrBusy) {
				return err
			}
			for i := 0; i < k; i++ {
				fr := s.Frame(i)
				var l [4]byte
				binary.BigEndian.PutUint32(l[:], uint32(len(fr)))
				f.Write(l[:])
				f.Write(fr)
			}
			got += k
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d frames in 30s", got, n)
			}
		}
		fmt.Printf("attached in %v, received %d\n", attach.Round(time.Microsecond), got)
		return f.Close()
	case "hold":
		// Receive until a burst arrives, say how many it holds, and keep
		// them until killed.
		for {
			k, err := s.Recv(s.Burst())
			if err != nil && !errors.Is(err, service.ErrBusy) {
				return err
			}
			if k > 0 {
				fmt.Printf("holding %d\n", k)
				select {}
			}
		}
	case "send":
		n, _ := strconv.Atoi(args[2])
		frames := make([][]byte, 0, 32)
		sent := 0
		for deadline := time.Now().Add(30 * time.Second); sent < n; {
			frames = frames[:0]
			for i := sent; i < n && len(frames) < 32; i++ {
				frames = append(frames, helperFrame(i))
			}
			k, err := s.Send(frames)
			if err != nil {
				return err
			}
			sent += k
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d frames sent in 30s", sent, n)
			}
		}
		fmt.Printf("attached in %v, sent %d\n", attach.Round(time.Microsecond), sent)
		return nil
	case "untilgone":
		// Receive until the session fails; print why.
		fmt.Println("attached")
		for {
			if _, err := s.Recv(s.Burst()); err != nil && !errors.Is(err, service.ErrBusy) {
				fmt.Printf("recv: %v\n", err)
				if errors.Is(err, service.ErrDaemonGone) {
					return nil
				}
				return err
			}
		}
	case "rate":
		window, err := time.ParseDuration(args[2])
		if err != nil {
			return err
		}
		var pkts, bytes uint64
		begin := time.Now()
		for time.Since(begin) < window {
			k, err := s.Recv(s.Burst())
			if err != nil && !errors.Is(err, service.ErrBusy) {
				return err
			}
			pkts += uint64(k)
			bytes += s.Bytes()
		}
		el := time.Since(begin)
		fmt.Printf("attached in %v, received %d packets (%d bytes) in %v: %.0f pps\n", attach.Round(time.Microsecond), pkts, bytes, el.Round(time.Millisecond), float64(pkts)/el.Seconds())
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// helperFrame is the i-th frame the send role sends: broadcast, a local
// experimental EtherType, and its number.
func helperFrame(i int) []byte {
	f := make([]byte, 64)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5})
	copy(f[14:], "cephdpdk-service")
	binary.BigEndian.PutUint32(f[30:], uint32(i))
	return f
}
