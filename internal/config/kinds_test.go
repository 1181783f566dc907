package config

import "testing"

func TestKinds(t *testing.T) {
	c := parseStepsBase(t)
	for _, tt := range []struct {
		name         string
		owned, fixed bool
		service      Service
		txq          int // -1: transmits nothing
		mbufs        int
	}{
		{ConsumerCount, false, false, c.Services[3], -1, 0},
		{ConsumerForward, false, false, c.Services[0], 1, 0},
		{ConsumerRoCE, true, false, c.Services[1], 2, 0},
		{ConsumerRoCE + " not roce.service", true, false, Service{Name: "x", Consumer: Consumer{Type: ConsumerRoCE}}, -1, 0},
		{ConsumerKernel, true, false, c.Services[2], -1, 0},
		{ConsumerProcess, true, true, Service{Name: "p", Consumer: Consumer{Type: ConsumerProcess, TxQueue: 3}}, 3, c.ProcessMbufs()},
	} {
		k := tt.service.Kind()
		if k == nil || KindOf(k.Traits().Name) != k {
			t.Errorf("%s: kind %v", tt.name, k)
			continue
		}
		txq, ok := k.TxQueue(c, tt.service)
		if !ok {
			txq = -1
		}
		if tr := k.Traits(); tr.Owned != tt.owned || tr.Fixed != tt.fixed || txq != tt.txq || k.Mbufs(c) != tt.mbufs {
			t.Errorf("%s: owned %v fixed %v tx queue %d mbufs %d, want %v %v %d %d",
				tt.name, tr.Owned, tr.Fixed, txq, k.Mbufs(c), tt.owned, tt.fixed, tt.txq, tt.mbufs)
		}
	}
	if KindOf("bogus") != nil || len(Kinds()) != 5 {
		t.Errorf("KindOf(bogus) = %v, %d kinds", KindOf("bogus"), len(Kinds()))
	}
}
