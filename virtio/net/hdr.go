package virtionet

import (
	"encoding/binary"

	"github.com/govm/govm/virtio"
)

// Legacy struct virtio_net_hdr (spec 5.1.6): flags u8, gso_type u8,
// hdr_len le16, gso_size le16, csum_start le16, csum_offset le16, and with
// MRG_RXBUF num_buffers le16. On the legacy interface the 12-byte form is
// used exactly when MRG_RXBUF is negotiated (5.1.6.1, legacy note), in both
// directions.
const (
	hdrLenBase   = 10
	hdrLenMrg    = 12
	numBuffersAt = 10 // offset of num_buffers
)

// Header fields the device checks (spec 5.1.6).
const (
	hdrFNeedsCsum = 1    // VIRTIO_NET_HDR_F_NEEDS_CSUM
	gsoNone       = 0    // VIRTIO_NET_HDR_GSO_NONE
	gsoTCPv4      = 1    // VIRTIO_NET_HDR_GSO_TCPV4
	gsoTCPv6      = 4    // VIRTIO_NET_HDR_GSO_TCPV6
	gsoECN        = 0x80 // VIRTIO_NET_HDR_GSO_ECN
)

// Frame size limits, excluding the vnet header.
const (
	ethHeaderLen = 14
	// maxFrame is a 1500-byte MTU frame plus Ethernet header and one
	// 802.1Q tag: what a guest without TSO can legitimately send.
	maxFrame = 1518
	// maxGSOFrame is the largest TSO frame (spec 5.1.6.3.1: 65562-byte
	// buffers hold header + 65550 bytes).
	maxGSOFrame = 65550
)

// hdrLen is the header length for the negotiated features.
func hdrLen(features uint64) int {
	if features&virtio.Bit(FeatureMrgRxBuf) != 0 {
		return hdrLenMrg
	}
	return hdrLenBase
}

// maxTXFrame is the largest frame the driver may send.
func maxTXFrame(features uint64) int {
	if features&(virtio.Bit(FeatureHostTSO4)|virtio.Bit(FeatureHostTSO6)) != 0 {
		return maxGSOFrame
	}
	return maxFrame
}

// checkTXHeader applies the driver requirements of spec 5.1.6.2.1 that the
// device can check: offloads are only used when negotiated, and a GSO frame
// has a segment size. The kernel validates csum_start/offset and hdr_len
// against the frame itself.
func checkTXHeader(h []byte, features uint64) string {
	has := func(bit uint) bool { return features&virtio.Bit(bit) != 0 }
	flags, gso := h[0], h[1]
	if flags&hdrFNeedsCsum != 0 && !has(FeatureCsum) {
		return "NEEDS_CSUM without VIRTIO_NET_F_CSUM"
	}
	if gso&gsoECN != 0 && !has(FeatureHostECN) {
		return "GSO ECN without VIRTIO_NET_F_HOST_ECN"
	}
	switch gso &^ gsoECN {
	case gsoNone:
		return ""
	case gsoTCPv4:
		if !has(FeatureHostTSO4) {
			return "GSO TCPv4 without VIRTIO_NET_F_HOST_TSO4"
		}
	case gsoTCPv6:
		if !has(FeatureHostTSO6) {
			return "GSO TCPv6 without VIRTIO_NET_F_HOST_TSO6"
		}
	default:
		return "unsupported gso_type"
	}
	if binary.LittleEndian.Uint16(h[4:]) == 0 {
		return "GSO with gso_size 0"
	}
	return ""
}
