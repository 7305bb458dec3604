// The grpc-go peer for the gRPC figures (run it with GOMAXPROCS=1): grpc-go v1.85.0
// serving HttpArena's benchmark.BenchmarkService/GetSum (unary) and gRPC interop's
// grpc.testing.TestService/StreamingOutputCall (server streaming: one message of
// response_parameters[i].size zero bytes per entry; interval_us and the other request
// fields are not used by the figures and are ignored). h2c on -addr, or TLS with -tls-cert
// and -tls-key; with -tls-addr too, h2c stays on -addr and TLS is served on -tls-addr (the
// arena's unary-grpc and unary-grpc-tls from one process).
//
// There is no protoc here (nor in CI), so no protoc-gen-go output: the two services are
// registered by hand as grpc.ServiceDesc values (what protoc-gen-go-grpc would write), and
// the four messages are encoded and decoded by a small codec over protowire
// (google.golang.org/protobuf's wire-format package). Generated code would go through
// proto.Marshal's table-driven path; for messages of two or three fields either costs well
// under a microsecond of the call's ~14 µs.
//
//	GOMAXPROCS=1 grpc-go-sum -addr 127.0.0.1:50051 [-tls-cert cert.pem -tls-key key.pem [-tls-addr 127.0.0.1:50052]]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// maxMessage is the most bytes one streamed message may ask for (the interop client's
// largest is 314,159).
const maxMessage = 4 << 20

type sum struct{}

func getSum(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var req sumRequest
	if err := dec(&req); err != nil {
		return nil, err
	}
	return &sumReply{result: req.a + req.b}, nil
}

var benchmarkService = grpc.ServiceDesc{
	ServiceName: "benchmark.BenchmarkService",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "GetSum", Handler: getSum}},
	Metadata:    "benchmark.proto",
}

type streaming struct{}

func streamingOutputCall(_ any, stream grpc.ServerStream) error {
	var req streamingOutputCallRequest
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	for _, size := range req.sizes {
		if size < 0 || size > maxMessage {
			return status.Error(codes.InvalidArgument, "a response size out of range")
		}
	}
	for _, size := range req.sizes {
		if err := stream.SendMsg(&streamingOutputCallResponse{body: make([]byte, size)}); err != nil {
			return err
		}
	}
	return nil
}

var testService = grpc.ServiceDesc{
	ServiceName: "grpc.testing.TestService",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "StreamingOutputCall",
		Handler:       streamingOutputCall,
		ServerStreams: true,
	}},
	Metadata: "grpc/testing/test.proto",
}

func main() {
	addr := flag.String("addr", "", "listen address, e.g. 127.0.0.1:50051 (required)")
	cert := flag.String("tls-cert", "", "TLS certificate chain (PEM); with -tls-key, serve TLS (ALPN h2)")
	key := flag.String("tls-key", "", "TLS private key (PEM)")
	tlsAddr := flag.String("tls-addr", "", "with -tls-cert and -tls-key: serve TLS here and h2c on -addr")
	flag.Parse()
	if *addr == "" || (*cert == "") != (*key == "") || (*tlsAddr != "" && *cert == "") {
		fmt.Fprintln(os.Stderr, "grpc-go-sum: -addr ADDR is required; -tls-cert and -tls-key go together; -tls-addr needs them")
		os.Exit(2)
	}
	var creds credentials.TransportCredentials
	if *cert != "" {
		c, err := credentials.NewServerTLSFromFile(*cert, *key)
		if err != nil {
			log.Fatalf("grpc-go-sum: %v", err)
		}
		creds = c
	}
	if *tlsAddr == "" {
		serve(*addr, creds)
		return
	}
	// h2c on -addr and TLS on -tls-addr: two servers in this one process.
	go serve(*tlsAddr, creds)
	serve(*addr, nil)
}

// serve answers on addr, over TLS with creds when given, until the process ends.
func serve(addr string, creds credentials.TransportCredentials) {
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(codec{})}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("grpc-go-sum: %v", err)
	}
	s := grpc.NewServer(opts...)
	s.RegisterService(&benchmarkService, sum{})
	s.RegisterService(&testService, streaming{})
	if err := s.Serve(lis); err != nil {
		log.Fatalf("grpc-go-sum: %v", err)
	}
}
