package membership

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// ErrNoKeyring is returned by SetKeys on a member started without a
// SecretKey: encryption cannot be turned on in a running member.
var ErrNoKeyring = errors.New("membership: gossip is not encrypted; a key needs a restart")

// SetKeys replaces this member's gossip keys at run time: every key in
// primary and secondary is installed, primary becomes the key this member
// encrypts with, and installed keys in neither are removed. Messages
// encrypted with any installed key are accepted. It changes only this
// member; rotating a cluster's key takes three rounds of SetKeys over all
// members (see docs/security.md). On a bad key it changes nothing. Safe for
// concurrent use.
func (m *Membership) SetKeys(primary []byte, secondary [][]byte) error {
	for i, k := range append([][]byte{primary}, secondary...) {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("membership: key %d: %w", i+1, err)
		}
	}
	kr := m.keyring
	if kr == nil {
		return ErrNoKeyring
	}
	for _, k := range append([][]byte{primary}, secondary...) {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("membership: install key: %w", err)
		}
	}
	if err := kr.UseKey(primary); err != nil {
		return fmt.Errorf("membership: use key: %w", err)
	}
	keep := func(k []byte) bool {
		return bytes.Equal(k, primary) || slices.ContainsFunc(secondary, func(s []byte) bool { return bytes.Equal(s, k) })
	}
	for _, k := range kr.GetKeys() {
		if !keep(k) {
			if err := kr.RemoveKey(k); err != nil {
				return fmt.Errorf("membership: remove key: %w", err)
			}
		}
	}
	return nil
}
