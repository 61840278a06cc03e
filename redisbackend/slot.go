package redisbackend

import (
	"fmt"

	"github.com/weirhq/weir/limitkey"
)

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// KeySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag (limitkey.HashTag), or of the whole key when it has none,
// modulo 16384. Keys of one group (one hash tag) share a slot.
func KeySlot(key string) uint16 {
	if tag := limitkey.HashTag(key); tag != "" {
		key = tag
	}
	return crc16(key) % slots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// checkKeys enforces the one-slot rule for a composite: a single key is
// always fine; several keys must be distinct and share one non-empty hash
// tag. It requires identical tags rather than identical slots so that code
// tested on a single Redis behaves the same on a Cluster.
func checkKeys(keys []string) error {
	if len(keys) == 0 {
		return fmt.Errorf("redisbackend: no keys")
	}
	if len(keys) == 1 {
		return nil
	}
	tag := limitkey.HashTag(keys[0])
	if tag == "" {
		return fmt.Errorf("%w: key 0 %q of a %d-key decision has no hash tag", ErrCrossSlot, keys[0], len(keys))
	}
	for i, k := range keys {
		if t := limitkey.HashTag(k); t != tag {
			return fmt.Errorf("%w: key %d %q has hash tag %q, key 0 %q has %q", ErrCrossSlot, i, k, t, keys[0], tag)
		}
		for _, prev := range keys[:i] {
			if prev == k {
				return fmt.Errorf("redisbackend: key %q appears twice in one decision", k)
			}
		}
	}
	return nil
}
