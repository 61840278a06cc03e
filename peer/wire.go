package peer

import (
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
)

// EncodeItem returns the wire form of one forwarded item, as the Client
// sends it inside a request: what DecodeItem reads. Tests and fuzzers of
// the owner's validation use the pair to feed it what the server decodes.
func EncodeItem(it decide.Request) ([]byte, error) { return proto.Marshal(itemToProto(it)) }

// DecodeItem reads one item in its wire form as the server does: any
// decodable message converts (validating it is the owner's job); bytes
// that are not a message are an error.
func DecodeItem(b []byte) (decide.Request, error) {
	var p peerv1.Item
	if err := proto.Unmarshal(b, &p); err != nil {
		return decide.Request{}, err
	}
	return itemFromProto(&p), nil
}
