// gRPC-Web from Node: @connectrpc/connect-node's grpc-web transport (binary, over HTTP/1.1)
// calling the demo's benchmark.BenchmarkService/GetSum, messages described at run time
// (no code generation). Prints one line per check; exits non-zero on the first failure.
//   node client.mjs http://127.0.0.1:PORT
import { createPromiseClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { proto3, MethodKind } from "@bufbuild/protobuf";

const SumRequest = proto3.makeMessageType("benchmark.SumRequest", [
  { no: 1, name: "a", kind: "scalar", T: 5 },
  { no: 2, name: "b", kind: "scalar", T: 5 },
]);
const SumReply = proto3.makeMessageType("benchmark.SumReply", [
  { no: 1, name: "result", kind: "scalar", T: 5 },
]);
const BenchmarkService = {
  typeName: "benchmark.BenchmarkService",
  methods: {
    getSum: { name: "GetSum", I: SumRequest, O: SumReply, kind: MethodKind.Unary },
    nope: { name: "Nope", I: SumRequest, O: SumReply, kind: MethodKind.Unary },
  },
};

const transport = createGrpcWebTransport({ baseUrl: process.argv[2], httpVersion: "1.1" });
const client = createPromiseClient(BenchmarkService, transport);
const reply = await client.getSum({ a: 40, b: 2 });
if (reply.result !== 42) {
  console.error(`GetSum(40, 2) = ${reply.result}`);
  process.exit(1);
}
console.log("connect-node grpc-web GetSum(40, 2) = 42");
try {
  await client.nope({ a: 1, b: 1 });
  console.error("an unknown method answered");
  process.exit(1);
} catch (e) {
  if (!(e instanceof ConnectError) || e.code !== Code.Unimplemented) {
    console.error(`an unknown method: ${e}`);
    process.exit(1);
  }
}
console.log("connect-node grpc-web unknown method: UNIMPLEMENTED");
