#!/usr/bin/env python3
"""Pattern disk images for the guest blk tests (see lib/blkpattern.h).

  mkpattern.py make IMG SIZE            write the read pattern (SIZE: 16M, 4096K, bytes)
  mkpattern.py check IMG                verify the read pattern everywhere
  mkpattern.py check-write IMG START N  verify the guest's write pattern in
                                        sectors [START, START+N) and the read
                                        pattern everywhere else
Exit status 0 when the image matches."""
import struct
import sys

READ_KEY = 0x9E3779B97F4A7C15
WRITE_KEY = 0xDEADBEEFCAFEF00D
MASK = (1 << 64) - 1


def sector(s, key):
    return struct.pack("<64Q", *[((s << 16) | w) ^ key for w in range(64)])


def parse_size(v):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if v and v[-1].upper() in mult:
        return int(v[:-1]) * mult[v[-1].upper()]
    return int(v)


def make(path, size):
    if size % 512:
        sys.exit("size must be a multiple of 512")
    with open(path, "wb") as f:
        for s in range(size // 512):
            f.write(sector(s, READ_KEY))


def check(path, wstart=0, wcount=0):
    bad = 0
    with open(path, "rb") as f:
        s = 0
        while True:
            b = f.read(512)
            if not b:
                break
            key = WRITE_KEY if wstart <= s < wstart + wcount else READ_KEY
            if b != sector(s, key):
                if bad < 5:
                    print("sector %d differs" % s)
                bad += 1
            s += 1
    print("%d sectors, %d bad" % (s, bad))
    return bad == 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "make":
        make(argv[2], parse_size(argv[3]))
    elif len(argv) == 3 and argv[1] == "check":
        sys.exit(0 if check(argv[2]) else 1)
    elif len(argv) == 5 and argv[1] == "check-write":
        sys.exit(0 if check(argv[2], int(argv[3]), int(argv[4])) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
