module linerate/bench/ws-peers/go

go 1.22

require github.com/gorilla/websocket v1.5.3
