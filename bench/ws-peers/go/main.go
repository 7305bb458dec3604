// WebSocket echo on GET /ws: net/http + github.com/gorilla/websocket.
//
// Usage: ws-echo 127.0.0.1:PORT
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"runtime"

	"github.com/gorilla/websocket"
)

// Defaults: 4 KiB read and write buffers, no read limit, EnableCompression
// false (permessage-deflate is not negotiated), and CheckOrigin rejects a
// request whose Origin header names a host other than Host.
var upgrader = websocket.Upgrader{}

func echo(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has already written an HTTP error response.
	}
	defer conn.Close()
	// Pings are answered by gorilla's default ping handler and a close frame
	// is echoed by its default close handler, both while ReadMessage runs.
	for {
		mt, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if err := conn.WriteMessage(mt, msg); err != nil {
			return
		}
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ws-echo 127.0.0.1:PORT")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)

	http.HandleFunc("GET /ws", echo)
	log.Fatal(http.ListenAndServe(os.Args[1], nil))
}
