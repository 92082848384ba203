package bootparam

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/govm/govm/arch/x86/layout"
)

// bz describes a crafted bzImage for tests.
type bz struct {
	setupSects uint8
	version    uint16
	xlf        uint16
	pm         []byte // protected-mode part
	payloadOff uint32
	payloadLen uint32
}

// build lays out a bzImage the way arch/x86/boot/tools/build.c does: boot
// sector + setup sectors (header at 0x1f1), then the protected-mode part.
func (b bz) build() []byte {
	le := binary.LittleEndian
	sects := int(b.setupSects)
	if sects == 0 {
		sects = 4
	}
	img := make([]byte, (sects+1)*512)
	img[offSetupSects] = b.setupSects
	le.PutUint16(img[offBootFlag:], BootFlagMagic)
	img[offJump], img[offJump+1] = 0xeb, 0x6a
	le.PutUint32(img[offHeader:], HeaderMagic)
	le.PutUint16(img[offVersion:], b.version)
	img[offLoadFlags] = LoadedHigh
	le.PutUint32(img[offCode32Start:], layout.KernelLoadAddr)
	le.PutUint32(img[offInitrdAddrMax:], 0x7fffffff)
	le.PutUint32(img[offKernelAlign:], 0x200000)
	img[offRelocatable] = 1
	le.PutUint16(img[offXLoadFlags:], b.xlf)
	le.PutUint32(img[offCmdlineSize:], 2047)
	le.PutUint32(img[offPayloadOffset:], b.payloadOff)
	le.PutUint32(img[offPayloadLength:], b.payloadLen)
	le.PutUint64(img[offPrefAddress:], 0x1000000)
	le.PutUint32(img[offInitSize:], 0x200000)
	return append(img, b.pm...)
}

// bzWithPayload returns a 64-bit-capable bzImage whose protected-mode part
// is a 0x300-byte stub followed by payload.
func bzWithPayload(payload []byte) []byte {
	pm := append(bytes.Repeat([]byte{0x90}, 0x300), payload...)
	return bz{setupSects: 1, version: 0x020f, xlf: XLFKernel64, pm: pm, payloadOff: 0x300, payloadLen: uint32(len(payload))}.build()
}

// phdr is a program header for makeELF.
type phdr struct {
	typ                       uint32
	off, vaddr, paddr, filesz uint64
	memsz                     uint64
}

// makeELF builds an ELF64 x86-64 ET_EXEC with the given program headers
// and body bytes appended after them (file offsets in phdrs are absolute).
func makeELF(entry uint64, phs []phdr, size int) []byte {
	le := binary.LittleEndian
	img := make([]byte, max(size, elfHeaderLen+len(phs)*elfPhdrLen))
	copy(img, []byte{0x7f, 'E', 'L', 'F', elfClass64, elfDataLSB, 1})
	le.PutUint16(img[16:], elfTypeExec)
	le.PutUint16(img[18:], elfMachineX64)
	le.PutUint32(img[20:], elfVersionCurr)
	le.PutUint64(img[24:], entry)
	le.PutUint64(img[32:], elfHeaderLen)
	le.PutUint16(img[52:], elfHeaderLen)
	le.PutUint16(img[54:], elfPhdrLen)
	le.PutUint16(img[56:], uint16(len(phs)))
	for i, p := range phs {
		h := img[elfHeaderLen+i*elfPhdrLen:]
		le.PutUint32(h[0:], p.typ)
		le.PutUint64(h[8:], p.off)
		le.PutUint64(h[16:], p.vaddr)
		le.PutUint64(h[24:], p.paddr)
		le.PutUint64(h[32:], p.filesz)
		le.PutUint64(h[40:], p.memsz)
	}
	// Recognizable contents for the loadable range.
	for i := elfHeaderLen + len(phs)*elfPhdrLen; i < len(img); i++ {
		img[i] = byte(i)
	}
	return img
}

// tinyELF is a valid two-segment kernel linked like vmlinux: virtual
// addresses in the kernel map, physical at 16 MiB, physical entry.
func tinyELF() []byte {
	return makeELF(0x1000000, []phdr{
		{typ: elfPTLoad, off: 0x1000, vaddr: 0xffffffff81000000, paddr: 0x1000000, filesz: 0x1000, memsz: 0x1000},
		{typ: 4 /* PT_NOTE */, off: 0x1000, filesz: 0x10, memsz: 0x10},
		{typ: elfPTLoad, off: 0x2000, vaddr: 0xffffffff81200000, paddr: 0x1200000, filesz: 0x800, memsz: 0x3000},
	}, 0x2800)
}

func gzipBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// debianKernel returns the path of an installed Debian kernel image, the
// real-world bzImage the tests check against.
func debianKernel(t *testing.T) string {
	m, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(m) == 0 {
		t.Skip("no /boot/vmlinuz-* on this machine (CI installs linux-image-amd64)")
	}
	return m[len(m)-1]
}
