package redisconn_test

import (
	"fmt"

	"github.com/weirhq/weir/redisconn"
)

func ExampleParseURL() {
	e, err := redisconn.ParseURL("rediss://weir:s3cret@cache.internal:6380/2?client_name=edge")
	if err != nil {
		panic(err)
	}
	cfg := redisconn.DefaultConfig()
	cfg.Mode, cfg.Addrs, cfg.DB = redisconn.Single, e.Addrs, e.DB
	cfg.Username, cfg.Password, cfg.ClientName = e.Username, e.Password, e.ClientName
	cfg.TLS.Enabled = e.TLS
	fmt.Println(cfg) // what logs and status show
	_, err = redisconn.ParseURL("redis://weir:s3cret@cache.internal:notaport")
	fmt.Println(err)
	// Output:
	// rediss://weir:xxxxx@cache.internal:6380/2
	// redis://weir:xxxxx@cache.internal:notaport: invalid port ":notaport" after host
}

func ExampleParseSentinel() {
	master, addrs, err := redisconn.ParseSentinel("mymaster@10.0.0.1,10.0.0.2:26380")
	fmt.Println(master, addrs, err)
	// Output: mymaster [10.0.0.1:26379 10.0.0.2:26380] <nil>
}
