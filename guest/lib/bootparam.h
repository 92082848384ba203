/* The zero page (struct boot_params), by offset, as Documentation/x86/
 * boot.rst ("THE REAL-MODE KERNEL HEADER", "ZERO PAGE") and
 * Documentation/x86/zero-page.rst lay it out. Accessors rather than a
 * packed struct keep the offsets visible next to the spec's table. */
#ifndef LIB_BOOTPARAM_H
#define LIB_BOOTPARAM_H

#include <stdint.h>

#define BP_EXT_RAMDISK_IMAGE 0x0c0 /* high 32 bits of ramdisk_image */
#define BP_EXT_RAMDISK_SIZE 0x0c4
#define BP_EXT_CMD_LINE_PTR 0x0c8
#define BP_E820_ENTRIES 0x1e8      /* u8 */
#define BP_HDR 0x1f1               /* struct setup_header */
#define BP_E820_TABLE 0x2d0        /* 128 x struct boot_e820_entry */
#define BP_E820_MAX 128

/* setup_header fields, as zero-page offsets. */
#define HDR_SETUP_SECTS 0x1f1
#define HDR_BOOT_FLAG 0x1fe        /* 0xaa55 */
#define HDR_MAGIC 0x202            /* "HdrS" */
#define HDR_VERSION 0x206
#define HDR_TYPE_OF_LOADER 0x210
#define HDR_LOADFLAGS 0x211
#define HDR_CODE32_START 0x214
#define HDR_RAMDISK_IMAGE 0x218
#define HDR_RAMDISK_SIZE 0x21c
#define HDR_CMD_LINE_PTR 0x228
#define HDR_CMDLINE_SIZE 0x238

#define HDR_MAGIC_VALUE 0x53726448 /* "HdrS" little-endian */

/* E820 entry: u64 addr, u64 size, u32 type, packed (20 bytes). */
#define E820_ENTRY_SIZE 20

static inline uint8_t bp_u8(const void *bp, unsigned off)
{
	return *((const volatile uint8_t *)bp + off);
}

static inline uint16_t bp_u16(const void *bp, unsigned off)
{
	return (uint16_t)(bp_u8(bp, off) | bp_u8(bp, off + 1) << 8);
}

static inline uint32_t bp_u32(const void *bp, unsigned off)
{
	return (uint32_t)bp_u16(bp, off) | (uint32_t)bp_u16(bp, off + 2) << 16;
}

static inline uint64_t bp_u64(const void *bp, unsigned off)
{
	return (uint64_t)bp_u32(bp, off) | (uint64_t)bp_u32(bp, off + 4) << 32;
}

/* The zero page the loader handed over (RSI at the 64-bit entry). */
extern const void *boot_params;

#endif
