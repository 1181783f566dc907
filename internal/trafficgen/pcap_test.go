package trafficgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWritePcapReadPcap(t *testing.T) {
	frames := Generate(9, 300, DefaultMix())
	var buf bytes.Buffer
	if err := WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	if le.Uint32(b) != pcapMagicMicro || le.Uint16(b[4:]) != 2 || le.Uint16(b[6:]) != 4 || le.Uint32(b[20:]) != linkTypeEthernet {
		t.Fatalf("file header % x", b[:pcapFileHdrLen])
	}
	// Walk the records: timestamps step by PcapInterval, lengths match.
	off := pcapFileHdrLen
	for i, f := range frames {
		rec := b[off : off+pcapRecordHdrLen]
		ts := time.Unix(int64(le.Uint32(rec)), int64(le.Uint32(rec[4:]))*1000)
		if want := PcapEpoch().Add(time.Duration(i) * PcapInterval); !ts.Equal(want) {
			t.Fatalf("frame %d stamped %v, want %v", i, ts, want)
		}
		if int(le.Uint32(rec[8:])) != len(f.Data) || int(le.Uint32(rec[12:])) != len(f.Data) {
			t.Fatalf("frame %d: record lengths % x, want %d", i, rec[8:], len(f.Data))
		}
		off += pcapRecordHdrLen + len(f.Data)
	}
	if off != len(b) {
		t.Fatalf("file is %d bytes, records end at %d", len(b), off)
	}

	got, err := ReadPcap(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(frames) {
		t.Fatalf("read %d frames, wrote %d", len(got), len(frames))
	}
	for i := range got {
		if !bytes.Equal(got[i], frames[i].Data) {
			t.Fatalf("frame %d differs after round trip", i)
		}
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

func TestWritePcapErrors(t *testing.T) {
	frames := Generate(1, 3, DefaultMix())
	for after := range 7 {
		if err := WritePcap(&failWriter{after: after}, frames); err == nil {
			t.Errorf("write failing after %d calls: no error", after)
		}
	}
	huge := []Frame{{Data: make([]byte, pcapSnaplen+1)}}
	if err := WritePcap(&bytes.Buffer{}, huge); err == nil {
		t.Error("frame above snaplen: no error")
	}
}

// pcapFile builds a pcap file by hand in either byte order.
func pcapFile(bo binary.AppendByteOrder, magic, linkType uint32, records ...[]byte) []byte {
	b := bo.AppendUint32(nil, magic)
	b = bo.AppendUint16(b, 2)
	b = bo.AppendUint16(b, 4)
	b = append(b, make([]byte, 8)...)
	b = bo.AppendUint32(b, 65535)
	b = bo.AppendUint32(b, linkType)
	for _, r := range records {
		b = append(b, make([]byte, 8)...)
		b = bo.AppendUint32(b, uint32(len(r)))
		b = bo.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

func TestReadPcap(t *testing.T) {
	frame := bytes.Repeat([]byte{0xab}, 60)
	good := pcapFile(binary.LittleEndian, pcapMagicMicro, linkTypeEthernet, frame, frame[:14])
	hugeRecord := pcapFile(binary.LittleEndian, pcapMagicMicro, linkTypeEthernet)
	hugeRecord = binary.LittleEndian.AppendUint64(hugeRecord, 0)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, 1<<31)
	hugeRecord = binary.LittleEndian.AppendUint32(hugeRecord, 1<<31)
	tests := []struct {
		name   string
		in     []byte
		frames int
		ok     bool
	}{
		{"little endian micro", good, 2, true},
		{"big endian nano", pcapFile(binary.BigEndian, pcapMagicNano, linkTypeEthernet, frame), 1, true},
		{"no records", pcapFile(binary.LittleEndian, pcapMagicMicro, linkTypeEthernet), 0, true},
		{"empty", nil, 0, false},
		{"short header", good[:10], 0, false},
		{"bad magic", pcapFile(binary.LittleEndian, 0x0a0d0d0a, linkTypeEthernet, frame), 0, false},
		{"not ethernet", pcapFile(binary.LittleEndian, pcapMagicMicro, 101, frame), 0, false},
		{"cut in record header", good[:pcapFileHdrLen+5], 0, false},
		{"cut in record data", good[:pcapFileHdrLen+pcapRecordHdrLen+30], 0, false},
		{"cut in second record", good[:len(good)-1], 1, false},
		{"huge record", hugeRecord, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames, err := ReadPcap(bytes.NewReader(tt.in))
			if tt.ok != (err == nil) {
				t.Fatalf("ReadPcap error %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadPcap) {
				t.Errorf("error %v does not wrap ErrBadPcap", err)
			}
			if len(frames) != tt.frames {
				t.Errorf("got %d frames, want %d", len(frames), tt.frames)
			}
		})
	}
}

func FuzzReadPcap(f *testing.F) {
	var buf bytes.Buffer
	if err := WritePcap(&buf, Generate(1, 4, DefaultMix())); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(pcapFile(binary.BigEndian, pcapMagicNano, linkTypeEthernet, []byte{1, 2, 3}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		frames, err := ReadPcap(bytes.NewReader(in))
		total := 0
		for _, fr := range frames {
			total += len(fr) + pcapRecordHdrLen
		}
		if total > len(in) {
			t.Fatalf("read %d bytes of frames from %d bytes of input", total, len(in))
		}
		if err == nil && total+pcapFileHdrLen != len(in) {
			t.Fatalf("no error, but %d of %d bytes unaccounted for", len(in)-total-pcapFileHdrLen, len(in))
		}
	})
}

const (
	samplePcap   = "../../configs/sample/ceph-node.pcap"
	sampleReadme = "../../configs/sample/README.md"
)

// TestSampleUpToDate keeps the committed sample capture and its README in
// step with the generator. On failure run: go generate ./internal/trafficgen
// and update the README tables from the command's output.
func TestSampleUpToDate(t *testing.T) {
	frames := Generate(SampleSeed, SampleFrames, DefaultMix())
	var want bytes.Buffer
	if err := WritePcap(&want, frames); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.FromSlash(samplePcap))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s is stale (%d bytes, regenerated %d): run go generate ./internal/trafficgen", samplePcap, len(got), want.Len())
	}
	if len(got) >= 2<<20 {
		t.Errorf("%s is %d bytes; keep it well under 2 MiB", samplePcap, len(got))
	}
	readme, err := os.ReadFile(filepath.FromSlash(sampleReadme))
	if err != nil {
		t.Fatal(err)
	}
	if table := Summarize(frames).String(); !strings.Contains(string(readme), table) {
		t.Errorf("%s does not contain the current summary:\n%s", sampleReadme, table)
	}
}
