package engine

import "bytes"

// SlotCount is the number of Redis Cluster hash slots.
const SlotCount = 16384

// crc16tab is CRC16-CCITT (XMODEM: polynomial 0x1021, init 0), the checksum
// Redis Cluster uses for hash slots, built once at init: crc16tab[0] is the
// classic byte table; crc16tab[j][b] is what byte b contributes when j more
// bytes follow it, which lets crc16 take eight bytes per step (the CRC is
// linear: each byte's part can be looked up alone and the parts XORed).
var crc16tab = func() (t [8][256]uint16) {
	for i := range t[0] {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[0][i] = crc
	}
	for j := 1; j < len(t); j++ {
		for i := range t[j] {
			c := t[j-1][i] // one zero byte more
			t[j][i] = c<<8 ^ t[0][c>>8]
		}
	}
	return t
}()

func crc16(b []byte) uint16 {
	var crc uint16
	for len(b) >= 8 {
		// The running CRC folds into the next two bytes.
		crc = crc16tab[7][b[0]^byte(crc>>8)] ^ crc16tab[6][b[1]^byte(crc)] ^
			crc16tab[5][b[2]] ^ crc16tab[4][b[3]] ^ crc16tab[3][b[4]] ^
			crc16tab[2][b[5]] ^ crc16tab[1][b[6]] ^ crc16tab[0][b[7]]
		b = b[8:]
	}
	for _, c := range b {
		crc = crc<<8 ^ crc16tab[0][byte(crc>>8)^c]
	}
	return crc
}

// Slot returns key's Redis Cluster hash slot: CRC16 of the key, or of the
// part between the first '{' and the next '}' when that part is not empty.
func Slot(key []byte) int {
	if i := bytes.IndexByte(key, '{'); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % SlotCount)
}
