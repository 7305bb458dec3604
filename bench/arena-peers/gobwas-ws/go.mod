module gobwas-ws-arena

go 1.24

require github.com/gobwas/ws v1.4.0

require (
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	golang.org/x/sys v0.6.0 // indirect
)
