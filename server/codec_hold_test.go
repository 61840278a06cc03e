package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
)

func TestCodec_holdRequest_refusedOnTheWireBeyondItsBounds(t *testing.T) {
	many := map[string]string{}
	for i := range limiter.MaxDescriptors + 1 {
		many[strings.Repeat("d", i+1)] = "v"
	}
	items := make([]*weirv1.LeaseItem, MaxHoldEntries+1)
	for i := range items {
		items[i] = &weirv1.LeaseItem{Key: "k"}
	}
	for _, tc := range []struct {
		name, want string
		req        *weirv1.HoldRequest
	}{
		{"items", "more than 1000 items", &weirv1.HoldRequest{Items: items}},
		{"descriptors", "lookups[0]: more than 32 descriptors", &weirv1.HoldRequest{Lookups: []*weirv1.LeaseLookup{{Descriptors: many}}}},
		{"item descriptors", "items[0]: more than 32 descriptors", &weirv1.HoldRequest{Items: []*weirv1.LeaseItem{{Descriptors: many}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var got weirv1.HoldRequest
			if err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
				t.Fatal(err)
			}
			err = grpclimit.Refusal(&got)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) || len(got.GetItems())+len(got.GetLookups()) != 0 {
				t.Fatalf("got %v with %d items, want INVALID_ARGUMENT naming %q before decoding", err, len(got.GetItems()), tc.want)
			}
		})
	}
	ok, _ := proto.Marshal(&weirv1.HoldRequest{Seq: 1, Items: items[:MaxHoldEntries]})
	var got weirv1.HoldRequest
	if err := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(ok)}, &got); err != nil || grpclimit.Refusal(&got) != nil || len(got.GetItems()) != MaxHoldEntries {
		t.Fatalf("a request at the bound: %v, %d items", grpclimit.Refusal(&got), len(got.GetItems()))
	}
}
