package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"inventory/internal/fleet"
)

// A throw-away helper (not committed): two fleets, watchdog on and off.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for i, iv := range []string{"1s", "0"} {
		f, err := fleet.Start(ctx, fleet.Options{AdminToken: "tok", Listen: fmt.Sprintf("127.0.0.1:%d", 18091+i),
			Env: map[string]string{"INVENTORY_WATCHDOG_INTERVAL": iv, "INVENTORY_WORK_DELAY": "0"}, NoLockServices: true})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer f.Stop()
		fmt.Println("fleet", iv, "at", f.URL)
	}
	fmt.Println("ready")
	<-ctx.Done()
}
