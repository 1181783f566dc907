package session

import "github.com/cephdpdkd/cephdpdkd/roce"

// buffers are the send and receive memory of a Session, or of a Pool
// whose sessions share it, and their registrations.
type buffers struct {
	sendMem []byte
	recvMem []byte
	sendMR  *roce.MR
	recvMR  *roce.MR
}

// allocate takes sendLen and recvLen bytes from a and registers them on
// pd for local writes. After an error, release frees what it made.
func (b *buffers) allocate(a roce.Allocator, pd *roce.PD, sendLen, recvLen int) error {
	var err error
	if b.sendMem, err = a.Alloc(sendLen); err != nil {
		return err
	}
	if b.recvMem, err = a.Alloc(recvLen); err != nil {
		return err
	}
	if b.sendMR, err = pd.RegisterMR(b.sendMem, roce.AccessLocalWrite); err != nil {
		return err
	}
	b.recvMR, err = pd.RegisterMR(b.recvMem, roce.AccessLocalWrite)
	return err
}

// release deregisters and frees to a what allocate made, all or part.
func (b *buffers) release(a roce.Allocator) {
	if b.sendMR != nil {
		b.sendMR.Deregister()
	}
	if b.recvMR != nil {
		b.recvMR.Deregister()
	}
	if b.sendMem != nil {
		a.Free(b.sendMem)
	}
	if b.recvMem != nil {
		a.Free(b.recvMem)
	}
	*b = buffers{}
}
