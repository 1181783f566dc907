package app_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cephdpdkd/cephdpdkd/roce"
	"github.com/cephdpdkd/cephdpdkd/roce/cm"
	"github.com/cephdpdkd/cephdpdkd/roce/memlink"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest"
	"github.com/cephdpdkd/cephdpdkd/roce/roctest/cmtest"
)

// The server is side A of the network, the client side B.
var macSrv, macCli, ipSrv, ipCli = roctest.MACA, roctest.MACB, roctest.IPA, roctest.IPB

// testNet is a server endpoint (where the services run) and a client
// endpoint (where the test's peers run) on a roctest network.
type testNet struct {
	*cmtest.Net
	cliPD *roce.PD
}

func newTestNet(tb testing.TB, lc memlink.Config) *testNet {
	tb.Helper()
	return newNet(tb, cmtest.Config{Link: lc})
}

// lossy returns a link config that loses the fraction p of frames.
func lossy(p float64) memlink.Config { return memlink.Config{Seed: 7, Loss: p} }

// newCMNet is a testNet whose endpoints run connection managers.
func newCMNet(tb testing.TB, lc memlink.Config) *testNet {
	tb.Helper()
	return newNet(tb, cmtest.Config{Link: lc,
		CM: &cm.Config{Seed: 1, RetransmitTimeout: 100 * time.Millisecond, MaxRetries: 4, TimeWait: 50 * time.Millisecond}})
}

func newNet(tb testing.TB, cfg cmtest.Config) *testNet {
	tb.Helper()
	n := &testNet{Net: cmtest.New(tb, cfg)}
	n.cliPD = n.Cli.NewPD()
	return n
}

// cmParams are what the connection manager would negotiate: librdmacm's
// defaults toward rxe, with a short retransmit timeout for the tests.
type cmParams struct {
	mtu                int
	srvPSN, cliPSN     uint32
	timeout            uint8
	retry, rnrRetry    uint8
	minRNR             uint8
	srvRdAtom, cliRdAt int
}

func defaultCM() cmParams {
	return cmParams{mtu: 1024, srvPSN: 0xFFFFF8, cliPSN: 0x00ABCD, timeout: 12, retry: 7, rnrRetry: 7, minRNR: 1, srvRdAtom: 1, cliRdAt: 1}
}

// connect does what rdma_cm does to both QPs of a connection: INIT (the
// service's is there already) → RTR → RTS.
func (n *testNet) connect(srvQP, cliQP *roce.QP, p cmParams) {
	n.TB.Helper()
	for _, s := range []struct {
		qp           *roce.QP
		mac          [6]byte
		ip           netip.Addr
		dst          *roce.QP
		rq, sq       uint32
		rdAtom, dest int
	}{
		{srvQP, macCli, ipCli, cliQP, p.cliPSN, p.srvPSN, p.srvRdAtom, p.cliRdAt},
		{cliQP, macSrv, ipSrv, srvQP, p.srvPSN, p.cliPSN, p.cliRdAt, p.srvRdAtom},
	} {
		err := s.qp.Modify(&roce.QPAttr{
			State: roce.QPStateRTR, AV: roce.AddressVector{DstMAC: s.mac, DstIP: s.ip},
			PathMTU: p.mtu, DestQPN: s.dst.QPN(), RQPSN: s.rq, MaxDestRdAtomic: s.dest, MinRNRTimer: p.minRNR,
		}, roce.QPAttrState|roce.QPAttrAV|roce.QPAttrPathMTU|roce.QPAttrDestQPN|roce.QPAttrRQPSN|roce.QPAttrMaxDestRdAtomic|roce.QPAttrMinRNRTimer)
		if err != nil {
			n.TB.Fatal(err)
		}
		err = s.qp.Modify(&roce.QPAttr{
			State: roce.QPStateRTS, SQPSN: s.sq, Timeout: p.timeout, RetryCnt: p.retry, RNRRetry: p.rnrRetry, MaxRdAtomic: s.rdAtom,
		}, roce.QPAttrState|roce.QPAttrSQPSN|roce.QPAttrTimeout|roce.QPAttrRetryCnt|roce.QPAttrRNRRetry|roce.QPAttrMaxRdAtomic)
		if err != nil {
			n.TB.Fatal(err)
		}
	}
}

// peerQP is a QP on the client endpoint with its own CQs and one
// registered region, as a librdmacm example program sets up.
type peerQP struct {
	qp       *roce.QP
	scq, rcq *roce.CQ
	mr       *roce.MR
}

func (n *testNet) newPeer(sendWR, recvWR, memSize int) *peerQP {
	n.TB.Helper()
	p := &peerQP{}
	var err error
	if p.scq, err = n.Cli.NewCQ(roce.CQConfig{Depth: 2 * sendWR}); err != nil {
		n.TB.Fatal(err)
	}
	if p.rcq, err = n.Cli.NewCQ(roce.CQConfig{Depth: 2 * recvWR}); err != nil {
		n.TB.Fatal(err)
	}
	if p.qp, err = n.cliPD.CreateQP(&roce.QPInitAttr{SendCQ: p.scq, RecvCQ: p.rcq,
		Cap: roce.QPCap{MaxSendWR: sendWR, MaxRecvWR: recvWR}, SigAll: true}); err != nil {
		n.TB.Fatal(err)
	}
	if p.mr, err = n.cliPD.RegisterMR(make([]byte, memSize),
		roce.AccessLocalWrite|roce.AccessRemoteRead|roce.AccessRemoteWrite); err != nil {
		n.TB.Fatal(err)
	}
	if err := p.qp.Modify(&roce.QPAttr{State: roce.QPStateInit, Access: roce.AccessRemoteRead | roce.AccessRemoteWrite},
		roce.QPAttrState|roce.QPAttrAccessFlags); err != nil {
		n.TB.Fatal(err)
	}
	return p
}

// destroy tears the peer down as rdma_disconnect and rdma_destroy_ep do.
func (p *peerQP) destroy(tb testing.TB) {
	tb.Helper()
	p.qp.Modify(&roce.QPAttr{State: roce.QPStateError}, roce.QPAttrState)
	for _, err := range []error{p.qp.Destroy(), p.scq.Destroy(), p.rcq.Destroy(), p.mr.Deregister()} {
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func (p *peerQP) postRecv(tb testing.TB, id uint64, off, n int) {
	tb.Helper()
	if err := p.qp.PostRecv(&roce.RecvWR{ID: id, SGList: []roce.SGE{p.mr.SGE(off, n)}}); err != nil {
		tb.Fatal(err)
	}
}

func (p *peerQP) postSend(tb testing.TB, wr roce.SendWR) {
	tb.Helper()
	if err := p.qp.PostSend(&wr); err != nil {
		tb.Fatal(err)
	}
}

// doneRecorder records a done callback's calls.
type doneRecorder struct {
	calls int
	err   error
}

func (d *doneRecorder) done(err error) {
	d.calls++
	d.err = err
}

// fill writes a byte pattern derived from seed.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
}

// acceptor is a service that takes connections: app.Server's Poll and
// Accept.
type acceptor interface {
	Poll(now time.Time) int
	Accept(done func(error)) (*roce.QP, error)
}

// serveAccept serves svc, which its constructor has just returned with
// err, and accepts a connection on it.
func (n *testNet) serveAccept(svc acceptor, err error) (*roce.QP, *doneRecorder) {
	n.TB.Helper()
	n.Serve(svc, err)
	return accept(n.TB, svc)
}

// accept accepts a connection on svc and returns its QP and the
// recorder of its done callback.
func accept(tb testing.TB, svc acceptor) (*roce.QP, *doneRecorder) {
	tb.Helper()
	d := &doneRecorder{}
	qp, err := svc.Accept(d.done)
	if err != nil {
		tb.Fatal(err)
	}
	return qp, d
}
