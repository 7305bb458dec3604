'use strict';
// WebSocket echo on GET /ws: Node.js http server + the `ws` package.
// Usage: node echo.js 127.0.0.1:PORT

const http = require('http');
const { WebSocketServer } = require('ws');

const arg = process.argv[2];
const sep = arg ? arg.lastIndexOf(':') : -1;
if (sep < 1) {
  console.error('usage: node echo.js 127.0.0.1:PORT');
  process.exit(2);
}
const host = arg.slice(0, sep);
const port = Number(arg.slice(sep + 1));

const server = http.createServer((req, res) => {
  res.writeHead(404);
  res.end();
});

const wss = new WebSocketServer({ server, path: '/ws', perMessageDeflate: false });

wss.on('connection', (ws) => {
  // Pings are answered by ws itself; close frames are answered by ws itself.
  ws.on('message', (data, isBinary) => {
    ws.send(data, { binary: isBinary });
  });
  ws.on('error', () => {});
});

server.listen(port, host, () => {
  console.log(`ws-echo (node ${process.version}) listening on ${host}:${port}`);
});
