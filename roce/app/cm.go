package app

import "github.com/cephdpdkd/cephdpdkd/roce/cm"

// Listen serves svc on port of the connection manager m: each request
// to the port gets a QP from svc.Accept (a refusal rejects it), the
// service starts when the connection is established, a service that
// reports a connection done has it disconnected, and the connection's
// QP and buffers are freed when it ends in any way. svc must serve m's
// endpoint; the daemon polls it besides m.
func Listen(m *cm.Manager, port uint16, svc Server) error {
	return m.Listen(port, func(req *cm.ConnRequest) (cm.Accept, error) {
		c := req.Conn
		qp, err := svc.Accept(func(error) {
			// Disconnected follows, and closes; a connection already
			// disconnecting needs nothing more.
			m.Disconnect(c)
		})
		if err != nil {
			return cm.Accept{}, err
		}
		return cm.Accept{QP: qp, Events: cm.Events{
			Connected: func(_ *cm.Conn, err error) {
				if err != nil {
					svc.Close(qp)
					return
				}
				if svc.Established(qp) != nil {
					m.Disconnect(c)
				}
			},
			Disconnected: func(*cm.Conn, error) { svc.Close(qp) },
		}}, nil
	})
}
