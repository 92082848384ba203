package bootparam

import (
	"fmt"

	"github.com/govm/govm/arch/x86/layout"
)

// The boot path as vmm uses it: load the kernel, build the command line,
// place the initrd, then write the zero page.
func Example() {
	const memSize = 256 << 20
	k, err := Load(tinyELF())
	if err != nil {
		fmt.Println(err)
		return
	}
	line, err := BuildCmdline("console=ttyS0 reboot=k panic=1", "quiet", k.Header.CmdlineLimit())
	if err != nil {
		fmt.Println(err)
		return
	}
	initrd, err := InitrdAddr(k.Header, memSize, 3<<20, k.End)
	if err != nil {
		fmt.Println(err)
		return
	}
	zp, err := BuildZeroPage(ZeroPageConfig{
		Header: k.Header, CmdlineAddr: layout.CmdlineAddr, CmdlineLen: uint32(len(line)),
		InitrdAddr: initrd, InitrdSize: 3 << 20, E820: E820Map(memSize),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s entry=%#x segments=%d end=%#x\n", k.Format, k.Entry, len(k.Segments), k.End)
	fmt.Printf("cmdline=%q initrd=%#x zero page %d bytes\n", line, initrd, len(zp))
	// Output:
	// elf entry=0x1000000 segments=2 end=0x1203000
	// cmdline="console=ttyS0 reboot=k panic=1 quiet" initrd=0xfd00000 zero page 4096 bytes
}

func ExampleInitrdAddr_tooBig() {
	_, err := InitrdAddr(nil, 64<<20, 60<<20, 20<<20)
	fmt.Println(err)
	// Output:
	// bootparam: initrd does not fit in guest RAM: initrd is 60 MiB, but only 44 MiB is free between the kernel's end at 20 MiB and 64 MiB (min of RAM size 64 MiB, 3 GiB and the kernel's initrd_addr_max): give the guest more memory or use a smaller initrd
}
