package redisbackend

import "testing"

// The vectors are Redis Cluster's own: CRC-16/XMODEM of "123456789" is
// 0x31C3 (the cluster specification's check value), and the slots are what
// CLUSTER KEYSLOT answers.
func TestKeySlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]uint16{
		"":                     0,
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key
		"foo{{bar}}zap":        4015, // the tag is "{bar"
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
