// Package bootparam loads a Linux kernel for the x86 64-bit boot protocol:
// it parses the bzImage setup header, turns a bzImage (or an ELF vmlinux)
// into segments to copy into guest RAM, and builds the zero page (struct
// boot_params), the e820 map and the kernel command line.
//
// References: Documentation/x86/boot.rst ("THE LINUX/x86 BOOT PROTOCOL",
// "DETAILS OF HEADER FIELDS", "64-BIT BOOT PROTOCOL") and
// Documentation/x86/zero-page.rst for the boot_params offsets.
package bootparam

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Offsets of setup header fields, in the image and equally in the zero page
// (the header sits at 0x1f1 in both). boot.rst, "THE REAL-MODE KERNEL HEADER".
const (
	offSetupSects     = 0x1f1
	offVidMode        = 0x1fa
	offBootFlag       = 0x1fe
	offJump           = 0x200
	offHeader         = 0x202
	offVersion        = 0x206
	offTypeOfLoader   = 0x210
	offLoadFlags      = 0x211
	offCode32Start    = 0x214
	offRamdiskImage   = 0x218
	offRamdiskSize    = 0x21c
	offHeapEndPtr     = 0x224
	offCmdLinePtr     = 0x228
	offInitrdAddrMax  = 0x22c
	offKernelAlign    = 0x230
	offRelocatable    = 0x234
	offXLoadFlags     = 0x236
	offCmdlineSize    = 0x238
	offPayloadOffset  = 0x248
	offPayloadLength  = 0x24c
	offPrefAddress    = 0x258
	offInitSize       = 0x260
	setupHeaderEnd    = 0x268 // end of the fields we read (init_size is the last)
	setupHeaderMaxEnd = 0x290 // boot_params reserves 0x1f1..0x290 for the header
)

// Magic values from boot.rst.
const (
	BootFlagMagic = 0xaa55     // boot_flag at 0x1fe
	HeaderMagic   = 0x53726448 // "HdrS" at 0x202, little-endian
)

// Protocol versions that change what a loader may rely on.
const (
	// MinVersion is the oldest protocol we accept: 2.06 added
	// cmdline_size, so older kernels would leave the command-line limit
	// unknown. Every kernel since 2.6.22 is newer.
	MinVersion = 0x0206
	// Version64 (2.12) added xloadflags and with it XLF_KERNEL_64, the
	// only way to know a bzImage has the 64-bit entry at +0x200.
	Version64 = 0x020c
	// versionPayload (2.08) added payload_offset/payload_length.
	versionPayload = 0x0208
	// versionPrefAddress (2.10) added pref_address and init_size.
	versionPrefAddress = 0x020a
)

// loadflags and xloadflags bits (boot.rst, "DETAILS OF HEADER FIELDS").
const (
	LoadedHigh      = 0x01 // LOADED_HIGH: protected-mode code at 0x100000
	KeepSegments    = 0x40
	CanUseHeap      = 0x80 // CAN_USE_HEAP: heap_end_ptr is valid
	XLFKernel64     = 0x01 // XLF_KERNEL_64: 64-bit entry at +0x200
	XLFCanBeAbove4G = 0x02
	// DefaultCmdlineSz is the command-line limit when the header gives
	// none: x86 COMMAND_LINE_SIZE is 2048 including the NUL, and
	// cmdline_size counts without it (Linux itself reports 2047).
	DefaultCmdlineSz = 2047
)

// Errors from ParseSetupHeader and Load; always wrapped with details.
var (
	ErrNotKernel    = errors.New(`bootparam: not a Linux kernel image (no bzImage "HdrS" header and no ELF magic)`)
	ErrTruncated    = errors.New("bootparam: kernel image truncated")
	ErrBootFlag     = errors.New("bootparam: bad boot flag (want 0xAA55)")
	ErrOldProtocol  = errors.New("bootparam: boot protocol too old")
	ErrSetupSects   = errors.New("bootparam: setup_sects out of range")
	ErrPayload      = errors.New("bootparam: payload outside the image")
	ErrNot64Bit     = errors.New("bootparam: kernel has no 64-bit entry point")
	ErrBadELF       = errors.New("bootparam: bad ELF kernel")
	ErrCmdline      = errors.New("bootparam: bad kernel command line")
	ErrInitrdNoRoom = errors.New("bootparam: initrd does not fit in guest RAM")
	ErrZeroPage     = errors.New("bootparam: cannot build zero page")
)

// maxSetupSects bounds setup_sects: the real-mode part (boot sector plus
// setup) has to fit the 32 KiB real-mode window a loader reserves for it
// (boot.rst, "LOADING THE REST OF THE KERNEL"), so 64 sectors is already
// generous.
const maxSetupSects = 64

// SetupHeader is the part of the bzImage real-mode header a loader reads
// (struct setup_header, boot.rst). Raw keeps the header bytes exactly as in
// the image so the zero page can carry an unmodified copy.
type SetupHeader struct {
	SetupSects        uint8  // 0x1f1; 0 means 4 (see RealSetupSects)
	BootFlag          uint16 // 0x1fe, 0xAA55
	Header            uint32 // 0x202, "HdrS"
	Version           uint16 // 0x206, protocol version, e.g. 0x020f
	TypeOfLoader      uint8  // 0x210
	LoadFlags         uint8  // 0x211
	Code32Start       uint32 // 0x214
	InitrdAddrMax     uint32 // 0x22c, highest address the initrd may occupy
	KernelAlignment   uint32 // 0x230
	RelocatableKernel bool   // 0x234
	XLoadFlags        uint16 // 0x236 (protocol >= 2.12)
	CmdlineSize       uint32 // 0x238, maximum command line without its NUL
	PayloadOffset     uint32 // 0x248, from the start of the protected-mode code
	PayloadLength     uint32 // 0x24c
	PrefAddress       uint64 // 0x258 (protocol >= 2.10)
	InitSize          uint32 // 0x260, memory the kernel needs from its load address

	// Raw is the header as it appears in the image from 0x1f1 to its
	// end (0x202 + the byte at 0x201, capped at boot_params' room).
	Raw []byte
}

// RealSetupSects is the number of setup sectors after the boot sector;
// boot.rst: "If this field is 0, the real value is 4."
func (h *SetupHeader) RealSetupSects() int {
	if h.SetupSects == 0 {
		return 4
	}
	return int(h.SetupSects)
}

// KernelOffset is the file offset of the protected-mode kernel.
func (h *SetupHeader) KernelOffset() int { return (h.RealSetupSects() + 1) * 512 }

// Has64BitEntry reports whether the image may be entered in 64-bit mode at
// protected-mode start + 0x200 (boot.rst, "64-BIT BOOT PROTOCOL").
func (h *SetupHeader) Has64BitEntry() bool {
	return h.Version >= Version64 && h.XLoadFlags&XLFKernel64 != 0
}

// CmdlineLimit is the longest command line (without its NUL) the kernel
// accepts: cmdline_size, or DefaultCmdlineSz for a nil header (ELF kernels
// carry no header).
func (h *SetupHeader) CmdlineLimit() uint32 {
	if h == nil || h.CmdlineSize == 0 {
		return DefaultCmdlineSz
	}
	return h.CmdlineSize
}

// ParseSetupHeader reads and validates the setup header of a bzImage.
func ParseSetupHeader(img []byte) (*SetupHeader, error) {
	if len(img) < offHeader+4 {
		// Too short to even hold the "HdrS" magic: nothing says this
		// was ever a kernel.
		return nil, fmt.Errorf("%w: the file is only %d bytes", ErrNotKernel, len(img))
	}
	le := binary.LittleEndian
	if m := le.Uint32(img[offHeader:]); m != HeaderMagic {
		return nil, fmt.Errorf("%w: header magic %#08x at 0x202", ErrNotKernel, m)
	}
	if len(img) < setupHeaderEnd {
		return nil, fmt.Errorf("%w: %d bytes, the setup header ends at %#x", ErrTruncated, len(img), setupHeaderEnd)
	}
	h := &SetupHeader{
		SetupSects:        img[offSetupSects],
		BootFlag:          le.Uint16(img[offBootFlag:]),
		Header:            le.Uint32(img[offHeader:]),
		Version:           le.Uint16(img[offVersion:]),
		TypeOfLoader:      img[offTypeOfLoader],
		LoadFlags:         img[offLoadFlags],
		Code32Start:       le.Uint32(img[offCode32Start:]),
		InitrdAddrMax:     le.Uint32(img[offInitrdAddrMax:]),
		KernelAlignment:   le.Uint32(img[offKernelAlign:]),
		RelocatableKernel: img[offRelocatable] != 0,
		XLoadFlags:        le.Uint16(img[offXLoadFlags:]),
		CmdlineSize:       le.Uint32(img[offCmdlineSize:]),
	}
	if h.BootFlag != BootFlagMagic {
		return nil, fmt.Errorf("%w: found %#04x at 0x1fe", ErrBootFlag, h.BootFlag)
	}
	if h.Version < MinVersion {
		return nil, fmt.Errorf("%w: version %d.%02d, need at least 2.06", ErrOldProtocol, h.Version>>8, h.Version&0xff)
	}
	if h.Version < Version64 {
		// xloadflags was padding before 2.12: don't trust it.
		h.XLoadFlags = 0
	}
	if h.SetupSects > maxSetupSects {
		return nil, fmt.Errorf("%w: %d sectors, at most %d", ErrSetupSects, h.SetupSects, maxSetupSects)
	}
	kOff := h.KernelOffset()
	if kOff >= len(img) {
		return nil, fmt.Errorf("%w: the protected-mode kernel starts at %d (setup_sects %d) but the image has %d bytes",
			ErrTruncated, kOff, h.RealSetupSects(), len(img))
	}
	if h.Version >= versionPayload {
		h.PayloadOffset = le.Uint32(img[offPayloadOffset:])
		h.PayloadLength = le.Uint32(img[offPayloadLength:])
		// 64-bit arithmetic: offset+length cannot wrap.
		if end := uint64(kOff) + uint64(h.PayloadOffset) + uint64(h.PayloadLength); h.PayloadLength > 0 && end > uint64(len(img)) {
			return nil, fmt.Errorf("%w: payload %#x+%#x after the setup sectors ends at %d, image has %d bytes (truncated?)",
				ErrPayload, h.PayloadOffset, h.PayloadLength, end, len(img))
		}
	}
	if h.Version >= versionPrefAddress {
		h.PrefAddress = le.Uint64(img[offPrefAddress:])
		h.InitSize = le.Uint32(img[offInitSize:])
	}
	// boot.rst: the header ends at 0x202 + the byte at 0x201 (the
	// operand of the short jump over it); copy no more than that so
	// setup code never lands in boot_params.
	end := min(offHeader+int(img[offJump+1]), setupHeaderMaxEnd, len(img))
	h.Raw = append([]byte(nil), img[offSetupSects:end]...)
	return h, nil
}
