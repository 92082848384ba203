package virtioblk

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// QEMU's image locking (block/file-posix.c): open file description
// (OFD) byte-range read locks that say what each user of an image does and
// what it lets others do. For each permission bit i, a user that has the
// permission read-locks byte permBase+i, and a user that does not let
// others have it read-locks byte sharedBase+i. A user conflicts with
// another that refuses a permission it has, or that has one it refuses.
// govm takes the locks QEMU's virtio-blk takes for a raw image, so each
// VMM refuses an image the other writes; Linux keeps OFD locks and flock
// apart, so govm's flock alone never stopped QEMU.
const (
	lockPermBase   = 100 // RAW_LOCK_PERM_BASE
	lockSharedBase = 200 // RAW_LOCK_SHARED_BASE

	permConsistentRead = 1 << 0 // BLK_PERM_CONSISTENT_READ
	permWrite          = 1 << 1 // BLK_PERM_WRITE
	permWriteUnchanged = 1 << 2 // BLK_PERM_WRITE_UNCHANGED
	permResize         = 1 << 3 // BLK_PERM_RESIZE
	permAll            = permConsistentRead | permWrite | permWriteUnchanged | permResize
)

// diskPerms is what QEMU's virtio-blk (share-rw=off) holds on a raw image:
// it reads consistently and, unless read-only, writes; it lets others read,
// write data unchanged and resize, but not write.
func diskPerms(readOnly bool) (perm, shared uint64) {
	perm = permConsistentRead
	if !readOnly {
		perm |= permWrite
	}
	return perm, permConsistentRead | permWriteUnchanged | permResize
}

// lockLikeQEMU takes QEMU's lock bytes for perm and shared on fd, then
// checks no one else holds a conflicting byte. Locking first and checking
// after, as QEMU does, keeps two users that start together from both
// passing a check before either locked. It returns ErrLocked on a
// conflict; the locks go with the file's close.
func lockLikeQEMU(fd int, perm, shared uint64) error {
	for i := 0; 1<<i <= permAll; i++ {
		bit := uint64(1) << i
		if perm&bit != 0 {
			if err := ofdLock(fd, lockPermBase+int64(i)); err != nil {
				return err
			}
		}
		if shared&bit == 0 {
			if err := ofdLock(fd, lockSharedBase+int64(i)); err != nil {
				return err
			}
		}
	}
	for i := 0; 1<<i <= permAll; i++ {
		bit := uint64(1) << i
		if perm&bit != 0 {
			if held, err := ofdHeld(fd, lockSharedBase+int64(i)); err != nil || held {
				return conflict(err)
			}
		}
		if shared&bit == 0 {
			if held, err := ofdHeld(fd, lockPermBase+int64(i)); err != nil || held {
				return conflict(err)
			}
		}
	}
	return nil
}

func conflict(err error) error {
	if err != nil {
		return err
	}
	return ErrLocked
}

// ofdLock read-locks one byte for this open file description.
func ofdLock(fd int, off int64) error {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: off, Len: 1}
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
			return ErrLocked // someone write-locked the byte
		case err != nil:
			return fmt.Errorf("lock byte %d: %w", off, err)
		}
		return nil
	}
}

// ofdHeld reports whether another open file description holds a lock on
// the byte: F_OFD_GETLK asks whether a write lock could be placed.
func ofdHeld(fd int, off int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("test lock byte %d: %w", off, err)
		}
		return lk.Type != unix.F_UNLCK, nil
	}
}
