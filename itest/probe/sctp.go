package probe

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"time"

	"switchyard.dev/switchyard/itest/netns"
)

// SCTP packet layout (RFC 9260, section 3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-------------------------------+-------------------------------+
//	|      Source Port Number       |    Destination Port Number    |
//	+-------------------------------+-------------------------------+
//	|                       Verification Tag                        |
//	+---------------------------------------------------------------+
//	|                      Checksum (CRC32c)                        |
//	+---------------+---------------+-------------------------------+
//	|  Chunk Type   |  Chunk Flags  |         Chunk Length          |
//	+---------------+---------------+-------------------------------+
//	|  INIT / INIT ACK: Initiate Tag, a_rwnd, streams, initial TSN  |
//	+---------------------------------------------------------------+
const (
	sctpCommonLen = 12
	chunkInit     = 1
	chunkInitAck  = 2
	paramCookie   = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpPacket builds a packet with one INIT or INIT ACK chunk.
func sctpPacket(src, dst uint16, vtag uint32, chunkType byte, initTag uint32) []byte {
	body := 16
	if chunkType == chunkInitAck {
		body += 8 // a minimal State Cookie parameter, which INIT ACK must carry
	}
	b := make([]byte, sctpCommonLen+4+body)
	binary.BigEndian.PutUint16(b[0:], src)
	binary.BigEndian.PutUint16(b[2:], dst)
	binary.BigEndian.PutUint32(b[4:], vtag)
	c := b[sctpCommonLen:]
	c[0] = chunkType
	binary.BigEndian.PutUint16(c[2:], uint16(4+body))
	binary.BigEndian.PutUint32(c[4:], initTag)
	binary.BigEndian.PutUint32(c[8:], 65535) // a_rwnd
	binary.BigEndian.PutUint16(c[12:], 1)    // outbound streams
	binary.BigEndian.PutUint16(c[14:], 1)    // inbound streams
	binary.BigEndian.PutUint32(c[16:], initTag)
	if chunkType == chunkInitAck {
		binary.BigEndian.PutUint16(c[20:], paramCookie)
		binary.BigEndian.PutUint16(c[22:], 8)
		binary.BigEndian.PutUint32(c[24:], initTag)
	}
	// The CRC32c is computed with the checksum field zeroed and stored
	// least-significant byte first, as the RFC's reference code does.
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, castagnoli))
	return b
}

type sctpHeader struct {
	src, dst  uint16
	vtag      uint32
	chunkType byte
	initTag   uint32
}

var errNotSCTPInit = errors.New("not an SCTP INIT or INIT ACK")

func parseSCTP(b []byte) (sctpHeader, error) {
	if len(b) < sctpCommonLen+20 {
		return sctpHeader{}, errNotSCTPInit
	}
	h := sctpHeader{
		src: binary.BigEndian.Uint16(b[0:]), dst: binary.BigEndian.Uint16(b[2:]),
		vtag: binary.BigEndian.Uint32(b[4:]), chunkType: b[sctpCommonLen],
		initTag: binary.BigEndian.Uint32(b[sctpCommonLen+4:]),
	}
	if h.chunkType != chunkInit && h.chunkType != chunkInitAck {
		return h, errNotSCTPInit
	}
	return h, nil
}

func sctpNetwork(ip net.IP) string {
	if ip.To4() != nil {
		return "ip4:132"
	}
	return "ip6:132"
}

func checkSCTP(ns string, ip net.IP, port int, timeout time.Duration) error {
	c, err := netns.ListenPacket(ns, sctpNetwork(ip), "")
	if err != nil {
		return err
	}
	defer c.Close()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	srcPort := 32768 + binary.BigEndian.Uint16(rnd[0:])%28000
	tag := binary.BigEndian.Uint32(rnd[2:]) | 1
	pkt := sctpPacket(srcPort, uint16(port), 0, chunkInit, tag)
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 2048)
	for time.Now().Before(deadline) {
		if _, err := c.WriteTo(pkt, &net.IPAddr{IP: ip}); err != nil {
			return err
		}
		c.SetReadDeadline(minTime(deadline, time.Now().Add(timeout/4)))
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				break // resend after a read timeout
			}
			h, err := parseSCTP(buf[:n])
			if err != nil || !from.(*net.IPAddr).IP.Equal(ip) {
				continue
			}
			if h.chunkType == chunkInitAck && h.src == uint16(port) && h.dst == srcPort && h.vtag == tag {
				return nil
			}
		}
	}
	return fmt.Errorf("no SCTP INIT ACK from %s port %d within %s: %w", ip, port, timeout, os.ErrDeadlineExceeded)
}

// serveSCTP answers every INIT to port with an INIT ACK.
func (s *Server) serveSCTP(c net.PacketConn, port uint16) {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	var rnd [4]byte
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		h, err := parseSCTP(buf[:n])
		if err != nil || h.chunkType != chunkInit || h.dst != port {
			continue
		}
		rand.Read(rnd[:])
		c.WriteTo(sctpPacket(port, h.src, h.initTag, chunkInitAck, binary.BigEndian.Uint32(rnd[:])|1), from)
	}
}
