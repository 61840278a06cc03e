package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/weirhq/weir/client"
)

func ExampleClient_Decide() {
	cfg := client.DefaultConfig()
	cfg.Target = "127.0.0.1:8081"
	cfg.BatchWindow = 200 * time.Microsecond // coalesce concurrent calls
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	resp, err := c.Decide(context.Background(), map[string]string{"tenant": "acme", "user": "u7"}, 1)
	switch {
	case err != nil:
		fmt.Println("no answer, failing open:", err)
	case !resp.GetAllowed():
		fmt.Println("denied, retry after", resp.GetRetryAfter().AsDuration())
	default:
		fmt.Println("allowed,", resp.GetRemaining(), "remaining")
	}
}
