package bootparam

import (
	"errors"
	"strings"
	"testing"
)

func TestBuildCmdline(t *testing.T) {
	tests := []struct {
		name           string
		defaults, user string
		limit          uint32
		want           string
		err            bool
		msg            []string // substrings the error must name
	}{
		{"join", "console=ttyS0 reboot=k", "quiet", 100, "console=ttyS0 reboot=k quiet", false, nil},
		{"no user", "console=ttyS0", "", 100, "console=ttyS0", false, nil},
		{"no defaults", "", " root=/dev/vda ", 100, "root=/dev/vda", false, nil},
		{"empty", "", "", 100, "", false, nil},
		{"exactly at limit", strings.Repeat("a", 10), strings.Repeat("b", 9), 20, strings.Repeat("a", 10) + " " + strings.Repeat("b", 9), false, nil},
		{"limit+1", strings.Repeat("a", 10), strings.Repeat("b", 10), 20, "", true, []string{"21 bytes", "at most 20"}},
		{"default limit 2047 OK", strings.Repeat("x", 2047), "", 0, strings.Repeat("x", 2047), false, nil},
		{"default limit 2048 rejected", strings.Repeat("x", 2048), "", 0, "", true, []string{"2048", "2047"}},
		{"NUL in user", "console=ttyS0", "a\x00b", 100, "", true, []string{"NUL", "offset 15"}},
		{"NUL in defaults", "\x00", "x", 100, "", true, []string{"NUL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildCmdline(tc.defaults, tc.user, tc.limit)
			if tc.err {
				if !errors.Is(err, ErrCmdline) {
					t.Fatalf("err = %v, want ErrCmdline", err)
				}
				for _, m := range tc.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not mention %q", err, m)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCmdlineLimit(t *testing.T) {
	var nilHdr *SetupHeader
	if nilHdr.CmdlineLimit() != 2047 || (&SetupHeader{CmdlineSize: 255}).CmdlineLimit() != 255 {
		t.Fatal("CmdlineLimit wrong")
	}
}

func TestInitrdAddr(t *testing.T) {
	const MiB = 1 << 20
	hdr := &SetupHeader{InitrdAddrMax: 0x7fffffff}
	tests := []struct {
		name            string
		hdr             *SetupHeader
		mem, size, kend uint64
		want            uint64
		err             bool
	}{
		{"fits at top of 512 MiB", hdr, 512 * MiB, 10 * MiB, 80 * MiB, 502 * MiB, false},
		{"page aligned down", hdr, 512 * MiB, 10*MiB + 1, 80 * MiB, 502*MiB - 4096, false},
		{"below initrd_addr_max", hdr, 4096 * MiB, 10 * MiB, 80 * MiB, 2048*MiB - 10*MiB, false},
		{"below the PCI hole when addr_max is high", &SetupHeader{InitrdAddrMax: 0xffffffff}, 8192 * MiB, 1 * MiB, 80 * MiB, 3072*MiB - MiB, false},
		{"ELF default limit 0x37ffffff", nil, 2048 * MiB, 1 * MiB, 80 * MiB, 0x38000000 - MiB, false},
		{"exactly fits above the kernel", hdr, 100 * MiB, 20 * MiB, 80 * MiB, 80 * MiB, false},
		{"one page too big", hdr, 100 * MiB, 20*MiB + 1, 80 * MiB, 0, true},
		{"bigger than RAM", hdr, 64 * MiB, 128 * MiB, 20 * MiB, 0, true},
		{"kernel end past RAM", hdr, 64 * MiB, 1 * MiB, 80 * MiB, 0, true},
		{"no initrd", hdr, 64 * MiB, 0, 20 * MiB, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InitrdAddr(tc.hdr, tc.mem, tc.size, tc.kend)
			if tc.err {
				if !errors.Is(err, ErrInitrdNoRoom) || !strings.Contains(err.Error(), "MiB") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want a one-line ErrInitrdNoRoom with sizes in MiB", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %#x, %v; want %#x", got, err, tc.want)
			}
			if tc.size > 0 && (got%4096 != 0 || got < tc.kend || got+tc.size > LowRAMTop(tc.mem)) {
				t.Errorf("address %#x violates alignment or bounds", got)
			}
		})
	}
}
