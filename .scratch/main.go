package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("/usr/bin/chromium"), chromedp.NoSandbox, chromedp.WindowSize(1440, 1000))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(os.Args[1]), chromedp.Sleep(5*time.Second)); err != nil {
		fmt.Println("ERR", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//*[normalize-space(text())="User Metadata"]`)), chromedp.Sleep(3*time.Second)); err != nil {
		fmt.Println("ERR click", err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	fmt.Println(loc)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	fmt.Printf("%q %v\n", s, err)
	s2, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.textContent`))
	fmt.Printf("%d %v\n", len(s2), err)
	png, _ := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	os.WriteFile("/tmp/explore.png", png, 0o644)
}
