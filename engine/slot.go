package engine

// SlotCount is the number of Redis Cluster hash slots.
const SlotCount = 16384

// crc16tab is CRC16-CCITT (XMODEM: polynomial 0x1021, init 0), the checksum
// Redis Cluster uses for hash slots, built once at init.
var crc16tab = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^c]
	}
	return crc
}

// Slot returns key's Redis Cluster hash slot: CRC16 of the key, or of the
// part between the first '{' and the next '}' when that part is not empty.
func Slot(key []byte) int {
	for i, c := range key {
		if c == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						key = key[i+1 : j]
					}
					return int(crc16(key) % SlotCount)
				}
			}
			break
		}
	}
	return int(crc16(key) % SlotCount)
}
