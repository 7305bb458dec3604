package main

import (
	"encoding/json"
	"net"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/rewrite"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
)

// buildConfig is the entry's Caddyfile as Caddy's JSON, the shape `caddy adapt` gives it (a
// subroute per `handle` block, in the adapter's order), for the listeners of the command line:
//
//	{ admin off; auto_https off; log { output discard }; servers { protocols h1 h2 } }
//	:8080 {
//	    @baseline11 path /baseline11      handle @baseline11 { httparena }
//	    @pipeline path /pipeline          handle @pipeline { header Content-Type text/plain; respond "ok" 200 }
//	    handle_path /static/* { root * /data/static; file_server }
//	    handle { respond "Not Found" 404 }
//	}
//
// with, where the arena asks more than the entry serves: /baseline2 on the sum handler,
// file_server's `precompressed br gzip`, and a TLS server (h1 h2 h3) with the same routes.
func buildConfig(o options) ([]byte, error) {
	routes := siteRoutes(o.static)
	servers := map[string]*caddyhttp.Server{}
	if o.h1 != "" {
		servers["h1"] = &caddyhttp.Server{
			Listen: []string{"tcp/" + o.h1},
			Routes: routes,
			// The entry's global `servers { protocols h1 h2 }`: without TLS, h2 is not
			// offered (no h2c), so this listener speaks HTTP/1.1 only.
			Protocols: []string{"h1", "h2"},
			AutoHTTPS: &caddyhttp.AutoHTTPSConfig{Disabled: true},
		}
	}
	apps := caddy.ModuleMap{}
	if o.tls != "" {
		host, _, _ := net.SplitHostPort(o.tls)
		servers["tls"] = &caddyhttp.Server{
			Listen:    []string{"tcp/" + o.tls},
			Routes:    routes,
			Protocols: []string{"h1", "h2", "h3"},
			TLSConnPolicies: caddytls.ConnectionPolicies{{
				// Clients dialling an IP address send no SNI: certmagic then looks the
				// certificate up by the listener's local IP, and by this name after that.
				DefaultSNI: host,
			}},
			AutoHTTPS: &caddyhttp.AutoHTTPSConfig{Disabled: true},
		}
		tlsApp := caddytls.TLS{
			CertificatesRaw: caddy.ModuleMap{
				"load_files": caddyconfig.JSON(caddytls.FileLoader{{
					Certificate: o.cert,
					Key:         o.key,
				}}, nil),
			},
			// A self-signed certificate has no OCSP responder, and with no managed
			// certificates there is nothing in storage to clean: neither touches the disk.
			DisableOCSPStapling: true,
			DisableStorageClean: true,
		}
		apps["tls"] = caddyconfig.JSON(tlsApp, nil)
	}
	apps["http"] = caddyconfig.JSON(caddyhttp.App{Servers: servers}, nil)

	persist := false
	cfg := caddy.Config{
		Admin: &caddy.AdminConfig{
			Disabled: true,
			Config:   &caddy.ConfigSettings{Persist: &persist},
		},
		Logging: &caddy.Logging{
			Logs: map[string]*caddy.CustomLog{
				"default": {BaseLog: caddy.BaseLog{
					WriterRaw: caddyconfig.JSONModuleObject(caddy.DiscardWriter{}, "output", "discard", nil),
				}},
			},
		},
		AppsRaw: apps,
	}
	return json.Marshal(cfg)
}

// siteRoutes are the entry's site block as the adapter writes it: one route per `handle`
// block, all in one group (the first that matches is the only one run), each holding a
// subroute; the catch-all last.
func siteRoutes(static string) caddyhttp.RouteList {
	obj := func(v any, name string) json.RawMessage {
		return caddyconfig.JSONModuleObject(v, "handler", name, nil)
	}
	// handle is one `handle` block: each of inner is the handler list of one route of its
	// subroute.
	handle := func(paths []string, inner ...[]json.RawMessage) caddyhttp.Route {
		var sub caddyhttp.Subroute
		for _, hs := range inner {
			sub.Routes = append(sub.Routes, caddyhttp.Route{HandlersRaw: hs})
		}
		r := caddyhttp.Route{
			Group:       "group0",
			HandlersRaw: []json.RawMessage{obj(sub, "subroute")},
		}
		if paths != nil {
			r.MatcherSetsRaw = caddyhttp.RawMatcherSets{
				{"path": caddyconfig.JSON(caddyhttp.MatchPath(paths), nil)},
			}
		}
		return r
	}
	list := func(hs ...json.RawMessage) []json.RawMessage { return hs }

	// `handle @baseline11 { httparena }`, with /baseline2 (baseline-h2, baseline-h3) added.
	routes := caddyhttp.RouteList{
		handle([]string{"/baseline11", "/baseline2"}, list(obj(sumHandler{}, "arena_sum"))),
		// `handle @pipeline { header Content-Type text/plain; respond "ok" 200 }`.
		handle([]string{"/pipeline"}, list(
			obj(headers.Handler{Response: &headers.RespHeaderOps{HeaderOps: &headers.HeaderOps{
				Set: http.Header{"Content-Type": {"text/plain"}},
			}}}, "headers"),
			obj(caddyhttp.StaticResponse{StatusCode: caddyhttp.WeakString("200"), Body: "ok"}, "static_response"),
		)),
	}
	if static != "" {
		// `handle_path /static/* { root * DIR; file_server }`: the prefix stripped, then
		// `root` sets {http.vars.root}, which file_server (its own root left empty) reads per
		// request; `precompressed br gzip` is the arena's addition (see README.md).
		routes = append(routes, handle([]string{"/static/*"},
			list(obj(rewrite.Rewrite{StripPathPrefix: "/static"}, "rewrite")),
			list(
				obj(caddyhttp.VarsMiddleware{"root": static}, "vars"),
				obj(fileserver.FileServer{
					PrecompressedRaw: caddy.ModuleMap{
						"br":   json.RawMessage(`{}`),
						"gzip": json.RawMessage(`{}`),
					},
					PrecompressedOrder: []string{"br", "gzip"},
				}, "file_server"),
			),
		))
	}
	// `handle { respond "Not Found" 404 }`.
	routes = append(routes, handle(nil, list(
		obj(caddyhttp.StaticResponse{StatusCode: caddyhttp.WeakString("404"), Body: "Not Found"}, "static_response"),
	)))
	return routes
}
