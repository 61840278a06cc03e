package limitkey_test

import (
	"fmt"

	"github.com/weirhq/weir/limitkey"
)

func Example() {
	key := limitkey.Key("acme", "per-user", "acme", "u:7")
	fmt.Println(key)

	p, _ := limitkey.Split(key)
	fmt.Println(p.Name, p.NumValues(), p.Value(1), limitkey.Unescape(p.Value(1)))

	g, _ := limitkey.Group(key)
	fmt.Println(g, limitkey.HashTag(key) == limitkey.GroupTag(g))
	// Output:
	// weir:{acme}:per-user:acme:u%3A7
	// per-user 2 u%3A7 u:7
	// acme true
}
