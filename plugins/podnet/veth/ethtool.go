package veth

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolSTXCSUM is ETHTOOL_STXCSUM from linux/ethtool.h.
const ethtoolSTXCSUM = 0x17

type ethtoolValue struct{ cmd, data uint32 }

type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data uintptr
	_    [16]byte // pad to sizeof(struct ifreq)
}

// disableTxChecksum turns off transmit checksum offload (and with it TSO)
// on ifName in the current netns. A veth leaves checksums to be filled in
// by whoever finally transmits the packet; the OVS userspace datapath
// reads packets with a packet socket and forwards them as they are, so TCP
// from the pod would arrive with bad checksums.
func disableTxChecksum(ifName string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	v := ethtoolValue{cmd: ethtoolSTXCSUM}
	var r ifreqData
	copy(r.name[:], ifName)
	r.data = uintptr(unsafe.Pointer(&v))
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&r))); e != 0 {
		return fmt.Errorf("disabling tx checksum offload on %s: %w", ifName, e)
	}
	return nil
}
