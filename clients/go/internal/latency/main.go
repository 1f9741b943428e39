// Command latency times one small run (.a over {"a":1}) through the Go client on one
// connection: the Go line of bench/clients/run.sh.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"jqjail.dev/jqjail"
)

func main() {
	n := 2000
	if len(os.Args) > 2 {
		n, _ = strconv.Atoi(os.Args[2])
	}
	ctx := context.Background()
	c, err := jqjail.Dial(ctx, os.Args[1])
	if err != nil {
		panic(err)
	}
	input := []byte(`{"a":1}`)
	for i := 0; i < 200; i++ {
		if _, err := c.Run(ctx, ".a", input, nil); err != nil {
			panic(err)
		}
	}
	us := make([]float64, n)
	for i := range us {
		start := time.Now()
		r, err := c.Run(ctx, ".a", input, nil)
		if err != nil || string(r.Output) != "1" {
			panic(fmt.Sprint(r, err))
		}
		us[i] = float64(time.Since(start).Nanoseconds()) / 1e3
	}
	sort.Float64s(us)
	fmt.Printf("{\"client\":\"go\",\"n\":%d,\"p50_us\":%.0f,\"p90_us\":%.0f}\n", n, us[n/2], us[n*9/10])
}
